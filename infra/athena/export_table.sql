-- A Glue/Athena table over the data files of one DynamoDB export (DYNAMODB_JSON: gzipped
-- lines of {"Item": {"<attribute>": {"S": "..."}}}).
--
-- ${table}:          a name for this export's table: <kind>_<ExportId>, e.g.
--                    reactions_01732912345678_a1b2c3d4, in the run's Glue database
-- ${attributes}:     the attributes the queries read, each `<name>: struct<S: string>` or
--                    `<name>: struct<N: string>`; the SerDe ignores the others (and reads
--                    a missing one as NULL)
-- ${data_location}:  s3://<bucket>/<prefix>/AWSDynamoDB/<ExportId>/data/
--
-- The SerDe matches JSON keys case-insensitively, so "Item" and "S" read as item and s. The
-- data files are SSE-S3 encrypted, which needs no table property.
CREATE EXTERNAL TABLE IF NOT EXISTS ${table} (
  Item struct<${attributes}>
)
ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe'
LOCATION '${data_location}'
