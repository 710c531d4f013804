-- A Glue/Athena table over the data files of one DynamoDB export of the Reactions table
-- (DYNAMODB_JSON: gzipped lines of {"Item": {"<attribute>": {"S": "..."}}}).
--
-- ${table}:          a name for this export's table: reactions_<ExportId>, e.g.
--                    reactions_01732912345678_a1b2c3d4, in the run's Glue database
-- ${data_location}:  s3://<bucket>/<prefix>/AWSDynamoDB/<ExportId>/data/
--
-- Only the attributes the recount reads are declared; the SerDe ignores the others. It
-- matches JSON keys case-insensitively, so "Item" and "S" read as item and s. The data
-- files are SSE-S3 encrypted, which needs no table property.
CREATE EXTERNAL TABLE IF NOT EXISTS ${table} (
  Item struct<
    user_id: struct<S: string>,
    item_id: struct<S: string>,
    state: struct<S: string>
  >
)
ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'
LOCATION '${data_location}'
