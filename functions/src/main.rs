//! The bootstrap of every Likes function: Lambda names the function in `_HANDLER` (its
//! `Handler` in template.yaml), and the registry says what serves it.

#[tokio::main]
async fn main() -> Result<(), likes_functions::Error> {
    let handler = std::env::var("_HANDLER")
        .map_err(|_| "_HANDLER is not set: Lambda sets it from the function's Handler")?;
    let serve = likes_functions::function(&handler)
        .ok_or_else(|| format!("no function has the Handler {handler:?}"))?;
    serve().await
}
