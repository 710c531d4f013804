//! Reading every page of a Query: DynamoDB stops a page at 1 MB (or its `Limit`), and a
//! partition read whole must go on from each page's `LastEvaluatedKey`.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;

use crate::rows::Item;
use crate::StoreError;

/// Every item `query` matches, page after page.
pub(crate) async fn query_all(query: QueryFluentBuilder) -> Result<Vec<Item>, StoreError> {
    query_while(query, Ok, |_| true).await
}

/// `row` of each item `query` matches, page after page while `more` says the rows so far
/// call for the next.
pub(crate) async fn query_while<T>(
    query: QueryFluentBuilder,
    row: impl Fn(Item) -> Result<T, StoreError>,
    more: impl Fn(&[T]) -> bool,
) -> Result<Vec<T>, StoreError> {
    Ok(query_until(query, row, more).await?.0)
}

/// As [`query_while`], from the query's own start key if it has one; with whether it
/// stopped short of the partition's end (a page named a next one `more` did not ask for).
pub(crate) async fn query_until<T>(
    query: QueryFluentBuilder,
    row: impl Fn(Item) -> Result<T, StoreError>,
    more: impl Fn(&[T]) -> bool,
) -> Result<(Vec<T>, bool), StoreError> {
    let mut rows = Vec::new();
    let mut start = query.get_exclusive_start_key().clone();
    loop {
        let output = query
            .clone()
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|err| StoreError::aws("Query", err))?;
        for item in output.items.unwrap_or_default() {
            rows.push(row(item)?);
        }
        match output.last_evaluated_key {
            Some(key) if !key.is_empty() && more(&rows) => start = Some(key),
            Some(key) if !key.is_empty() => return Ok((rows, true)),
            _ => return Ok((rows, false)),
        }
    }
}
