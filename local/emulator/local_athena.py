"""StartQueryExecution, GetQueryExecution, GetQueryResults and StopQueryExecution as Athena
answers them, with queries really run: by DuckDB, over the S3 objects a table covers.

moto's Athena runs nothing: every query "succeeds" at once with no rows. These answer instead,
for the statements the service sends (and the DDL around them):

    CREATE DATABASE|SCHEMA [IF NOT EXISTS] <db>
    CREATE EXTERNAL TABLE [IF NOT EXISTS] <table> (<columns>)
        ROW FORMAT SERDE 'org.openx.data.jsonserde.JsonSerDe' LOCATION 's3://<bucket>/<prefix>/'
    DROP TABLE [IF EXISTS] <table>
    [WITH <name> AS (...), ...] SELECT ... FROM <table> ...
                                      <table> read as DuckDB's read_json over the objects

The catalog (databases and tables) is kept here, per account and region. A query runs as on
Athena: QUEUED, then RUNNING for `LIKES_LOCAL_ATHENA_SECONDS` (0.5 by default) so callers
meet the wait, then SUCCEEDED with its result as CSV at `<OutputLocation>/<id>.csv` (every
field quoted, NULL empty) or FAILED with the engine's message. The work group's output
location is moto's (CreateWorkGroup); a ClientRequestToken makes StartQueryExecution
idempotent. Objects whose names begin with `_` or `.` are skipped, as Athena skips them.
"""

import io
import os
import re
import tempfile
import threading
import time
import uuid

QUERY_SECONDS = float(os.environ.get("LIKES_LOCAL_ATHENA_SECONDS", "0.5"))
TARGET = "AmazonAthena."
OPERATIONS = {"StartQueryExecution", "GetQueryExecution", "GetQueryResults", "StopQueryExecution"}
ENGINE = {"SelectedEngineVersion": "Athena engine version 3", "EffectiveEngineVersion": "Athena engine version 3"}
RESULTS_PAGE_MAX = 1000
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
CREATE_DATABASE = re.compile(rf"^\s*CREATE\s+(?:DATABASE|SCHEMA)\s+(IF\s+NOT\s+EXISTS\s+)?({NAME})\s*$", re.I)
CREATE_TABLE = re.compile(
    rf"^\s*CREATE\s+EXTERNAL\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?({NAME})\s*\((.*)\)\s*"
    r"ROW\s+FORMAT\s+SERDE\s+'([^']+)'\s+LOCATION\s+'s3://([^/']+)/([^']*)'\s*$",
    re.I | re.S,
)
DROP_TABLE = re.compile(rf"^\s*DROP\s+TABLE\s+(IF\s+EXISTS\s+)?({NAME})\s*$", re.I)
# A table a statement reads; `JOIN UNNEST(...)` and other calls are not tables.
TABLE_REFERENCE = re.compile(rf"\b(FROM|JOIN)\s+({NAME}(?:\.{NAME})?)\b(?!\s*\()", re.I)
# A common table expression's name (`WITH name AS (`, `, name AS (`): not a table of the catalog.
CTE_NAME = re.compile(rf"(?:\bWITH|,)\s+({NAME})\s+AS\s*\(", re.I)
JSON_SERDE = "org.openx.data.jsonserde.JsonSerDe"
HIVE_SCALARS = {
    "string": "VARCHAR", "varchar": "VARCHAR", "bigint": "BIGINT", "int": "INTEGER",
    "integer": "INTEGER", "smallint": "SMALLINT", "tinyint": "TINYINT", "boolean": "BOOLEAN",
    "double": "DOUBLE", "float": "FLOAT", "date": "DATE", "timestamp": "TIMESTAMP",
}


class AthenaError(Exception):
    """An Athena error answer: its type and message."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class QueryFailed(Exception):
    """The engine refused or failed a statement: the execution ends FAILED with this."""


def split_top_level(text, separator=","):
    """`text` split at `separator`s outside <...> and (...)."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        if char == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def duckdb_type(hive):
    """A Hive column type (struct<a: string, b: bigint>, array<...>, scalars) in DuckDB's syntax."""
    hive = hive.strip()
    lower = hive.lower()
    if lower.startswith("struct<") and hive.endswith(">"):
        fields = []
        for field in split_top_level(hive[len("struct<"):-1]):
            name, _, kind = field.partition(":")
            if not kind:
                raise QueryFailed(f"line 1:1: struct field {field!r} has no type")
            fields.append(f'"{name.strip()}" {duckdb_type(kind)}')
        return f"STRUCT({', '.join(fields)})"
    if lower.startswith("array<") and hive.endswith(">"):
        return f"{duckdb_type(hive[len('array<'):-1])}[]"
    if lower in HIVE_SCALARS:
        return HIVE_SCALARS[lower]
    raise QueryFailed(f"line 1:1: Unknown type '{hive}' for the local Athena")


def table_columns(block):
    """The (name, DuckDB type) of each column of a CREATE TABLE's column list."""
    columns = []
    for column in split_top_level(block):
        name, _, kind = column.partition(" ")
        if not kind.strip():
            raise QueryFailed(f"line 1:1: column {column!r} has no type")
        columns.append((name.strip("`"), duckdb_type(kind)))
    return columns


class Table:
    def __init__(self, columns, bucket, prefix):
        self.columns, self.bucket, self.prefix = columns, bucket, prefix


class Execution:
    def __init__(self, request, query, database, workgroup, output):
        self.id = str(uuid.uuid4())
        self.account, self.region = request.account, request.region
        self.query, self.database, self.workgroup = query, database, workgroup
        self.statement_type = "DML" if query.lstrip().upper().startswith(("SELECT", "WITH")) else "DDL"
        suffix = "csv" if self.statement_type == "DML" else "txt"
        self.output = f"{output.rstrip('/')}/{self.id}.{suffix}"
        self.state = "QUEUED"
        self.reason = None
        self.submitted = time.time()
        self.completed = None
        self.scanned = 0
        self.columns, self.rows = [], []

    def description(self):
        status = {"State": self.state, "SubmissionDateTime": self.submitted}
        if self.completed is not None:
            status["CompletionDateTime"] = self.completed
        if self.reason:
            status["StateChangeReason"] = self.reason
            status["AthenaError"] = {"ErrorCategory": 2, "ErrorType": 1301, "Retryable": False, "ErrorMessage": self.reason}
        elapsed = int(((self.completed or time.time()) - self.submitted) * 1000)
        return {
            "QueryExecutionId": self.id,
            "Query": self.query,
            "StatementType": self.statement_type,
            "ResultConfiguration": {"OutputLocation": self.output},
            "QueryExecutionContext": {"Database": self.database, "Catalog": "AwsDataCatalog"},
            "Status": status,
            "Statistics": {
                "EngineExecutionTimeInMillis": elapsed,
                "TotalExecutionTimeInMillis": elapsed,
                "DataScannedInBytes": self.scanned,
            },
            "WorkGroup": self.workgroup,
            "EngineVersion": ENGINE,
        }


class LocalAthena:
    """The query operations, answered in place of moto's. `answer` runs under the emulator's
    one lock; a query's engine work runs on its own thread, outside it."""

    def __init__(self, lock):
        self.lock = lock
        self.executions = {}  # id -> Execution
        self.by_token = {}  # (account, token) -> (query, Execution)
        self.databases = {}  # (account, region, database) -> {table name: Table}

    def answer(self, request):
        operation = request.operation
        if operation == "StartQueryExecution":
            return {"QueryExecutionId": self._start(request).id}
        execution = self.executions.get(request.body.get("QueryExecutionId"))
        if execution is None or execution.account != request.account:
            raise AthenaError("InvalidRequestException", "QueryExecution was not found")
        if operation == "GetQueryExecution":
            return {"QueryExecution": execution.description()}
        if operation == "StopQueryExecution":
            if execution.state in ("QUEUED", "RUNNING"):
                execution.state, execution.reason = "CANCELLED", "Query was cancelled by user"
                execution.completed = time.time()
            return {}
        return self._results(execution, request.body)

    def _start(self, request):
        body = request.body
        query = body.get("QueryString", "")
        token = body.get("ClientRequestToken")
        if token:
            known = self.by_token.get((request.account, token))
            if known:
                if known[0] != query:
                    raise AthenaError("InvalidRequestException", "Idempotent parameters do not match")
                return known[1]
        workgroup = body.get("WorkGroup", "primary")
        output = self._output_location(request, workgroup, body.get("ResultConfiguration") or {})
        database = (body.get("QueryExecutionContext") or {}).get("Database", "default").lower()
        execution = Execution(request, query, database, workgroup, output)
        self.executions[execution.id] = execution
        if token:
            self.by_token[(request.account, token)] = (query, execution)
        try:
            work = self._plan(execution)
        except QueryFailed as failure:
            work = None
            self._end(execution, failure)
        threading.Thread(target=self._run, args=(execution, work), daemon=True).start()
        return execution

    def _output_location(self, request, workgroup, asked):
        from moto.athena.models import athena_backends

        group = athena_backends[request.account][request.region].work_groups.get(workgroup)
        if group is None:
            raise AthenaError("InvalidRequestException", f"WorkGroup {workgroup} is not found.")
        configured = (group.configuration or {}).get("ResultConfiguration") or {}
        enforced = (group.configuration or {}).get("EnforceWorkGroupConfiguration", True)
        location = configured.get("OutputLocation") if enforced else None
        location = location or asked.get("OutputLocation") or configured.get("OutputLocation")
        if not location:
            raise AthenaError(
                "InvalidRequestException",
                "No output location provided. An output location is required either through "
                "the Workgroup result configuration setting or as an API input.",
            )
        return location

    def _plan(self, execution):
        """Applies DDL at once (under the lock); for a query, snapshots the objects of the
        tables it reads and returns what the engine runs. Raises QueryFailed."""
        query = execution.query
        scope = (execution.account, execution.region)
        if match := CREATE_DATABASE.match(query):
            name = match.group(2).lower()
            if (*scope, name) in self.databases and not match.group(1):
                raise QueryFailed(f"Database {name} already exists")
            self.databases.setdefault((*scope, name), {})
            return None
        tables = self.databases.get((*scope, execution.database))
        if tables is None:
            raise QueryFailed(f"SCHEMA_NOT_FOUND: line 1:1: Schema '{execution.database}' does not exist")
        if match := CREATE_TABLE.match(query):
            if_not_exists, name, columns, serde, bucket, prefix = match.groups()
            name = name.lower()
            if serde != JSON_SERDE:
                raise QueryFailed(f"the local Athena reads {JSON_SERDE} tables only, not {serde}")
            if name in tables and not if_not_exists:
                raise QueryFailed(f"AlreadyExistsException: Table {name} already exists")
            tables.setdefault(name, Table(table_columns(columns), bucket, prefix))
            return None
        if match := DROP_TABLE.match(query):
            name = match.group(2).lower()
            if name not in tables and not match.group(1):
                raise QueryFailed(f"Table not found {name}")
            tables.pop(name, None)
            return None
        if execution.statement_type != "DML":
            raise QueryFailed(f"line 1:1: the local Athena does not run this statement: {query[:80]!r}")
        return self._snapshot(execution, tables)

    def _snapshot(self, execution, tables):
        from moto.s3.models import s3_backends

        sources = {}
        ctes = {name.lower() for name in CTE_NAME.findall(execution.query)}
        for _, reference in TABLE_REFERENCE.findall(execution.query):
            if reference.lower() in ctes:
                continue
            database, _, name = reference.lower().rpartition(".")
            table = (self.databases.get((execution.account, execution.region, database)) or {}).get(name) \
                if database else tables.get(name)
            if table is None:
                raise QueryFailed(
                    f"TABLE_NOT_FOUND: line 1:1: Table 'awsdatacatalog.{database or execution.database}.{name}' "
                    "does not exist"
                )
            bucket = s3_backends[execution.account]["aws"].buckets.get(table.bucket)
            if bucket is None:
                raise QueryFailed(f"HIVE_CANNOT_OPEN_SPLIT: The specified bucket does not exist: {table.bucket}")
            objects = []
            for key, stored in bucket.keys.items():
                name_part = key[len(table.prefix):]
                hidden = "/" in name_part or name_part[:1] in ("_", ".", "")
                if not key.startswith(table.prefix) or hidden or not hasattr(stored, "value"):
                    continue
                objects.append((name_part, bytes(stored.value)))
            sources[reference] = (table, objects)
        return sources

    def _run(self, execution, sources):
        time.sleep(QUERY_SECONDS)
        with self.lock:
            if execution.state != "QUEUED":
                return  # failed while planned, or cancelled
            execution.state = "RUNNING"
        outcome = None
        if sources is not None:
            try:
                outcome = self._execute(execution, sources)
            except QueryFailed as failure:
                outcome = failure
            except Exception as err:  # DuckDB's own errors: the data or the SQL
                outcome = QueryFailed(f"{type(err).__name__}: {err}")
        with self.lock:
            if execution.state != "RUNNING":
                return  # cancelled meanwhile
            if outcome is not None and not isinstance(outcome, QueryFailed):
                try:
                    self._write_result(execution, *outcome)
                    outcome = None
                except QueryFailed as failure:
                    outcome = failure
            self._end(execution, outcome)

    def _execute(self, execution, sources):
        import duckdb

        query = execution.query
        with tempfile.TemporaryDirectory(prefix="likes-athena-") as folder:
            connection = duckdb.connect()
            for index, (reference, (table, objects)) in enumerate(sources.items()):
                execution.scanned += sum(len(data) for _, data in objects)
                columns = ", ".join(f"'{name}': '{kind}'" for name, kind in table.columns)
                if objects:
                    paths = []
                    for number, (name, data) in enumerate(objects):
                        path = os.path.join(folder, f"{index}-{number}-{name}")
                        with open(path, "wb") as out:
                            out.write(data)
                        paths.append(path.replace("'", "''"))
                    listed = ", ".join(f"'{p}'" for p in paths)
                    source = (
                        f"read_json([{listed}], format = 'newline_delimited', "
                        f"compression = 'auto', columns = {{{columns}}})"
                    )
                else:
                    nulls = ", ".join(f'CAST(NULL AS {kind}) AS "{name}"' for name, kind in table.columns)
                    source = f"(SELECT {nulls} WHERE false)"
                query = re.sub(
                    rf"\b(FROM|JOIN)\s+{re.escape(reference)}\b",
                    lambda m, source=source: f"{m.group(1)} {source}",
                    query,
                    flags=re.I,
                )
            result = connection.sql(query)
            return list(result.columns), result.fetchall()

    def _write_result(self, execution, columns, rows):
        from moto.s3.models import s3_backends

        execution.columns, execution.rows = columns, rows
        text = io.StringIO()
        for row in [columns, *rows]:
            text.write(",".join("" if v is None else '"' + str(v).replace('"', '""') + '"' for v in row) + "\n")
        bucket, _, key = execution.output[len("s3://"):].partition("/")
        try:
            s3_backends[execution.account]["aws"].put_object(bucket, key, text.getvalue().encode())
        except Exception as err:  # the bucket is gone, say
            raise QueryFailed(f"writing {execution.output}: {type(err).__name__}: {err}")

    def _end(self, execution, failure):
        execution.completed = time.time()
        if failure is None:
            execution.state = "SUCCEEDED"
        else:
            execution.state, execution.reason = "FAILED", str(failure)

    def _results(self, execution, body):
        if execution.state != "SUCCEEDED":
            raise AthenaError("InvalidRequestException", f"Query has not yet finished. Current state: {execution.state}")
        limit = min(int(body.get("MaxResults", RESULTS_PAGE_MAX)), RESULTS_PAGE_MAX)
        start = int(body.get("NextToken") or 0)
        table = [execution.columns, *execution.rows] if execution.columns else []
        page = table[start:start + limit]
        answer = {
            "UpdateCount": 0,
            "ResultSet": {
                "Rows": [{"Data": [{} if v is None else {"VarCharValue": str(v)} for v in row]} for row in page],
                "ResultSetMetadata": {"ColumnInfo": [{"Name": c, "Label": c, "Type": "varchar"} for c in execution.columns]},
            },
        }
        if start + limit < len(table):
            answer["NextToken"] = str(start + limit)
        return answer
