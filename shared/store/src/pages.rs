//! Reading every page of a Query: DynamoDB stops a page at 1 MB (or its `Limit`), and a
//! partition read whole must go on from each page's `LastEvaluatedKey`.

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;

use crate::rows::Item;
use crate::StoreError;

/// Every item `query` matches, page after page.
pub(crate) async fn query_all(query: QueryFluentBuilder) -> Result<Vec<Item>, StoreError> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let output = query
            .clone()
            .set_exclusive_start_key(start.take())
            .send()
            .await
            .map_err(|err| StoreError::aws("Query", err))?;
        items.extend(output.items.unwrap_or_default());
        match output.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(items),
        }
    }
}
