"""Point-in-time history of the emulator's DynamoDB tables, for exports as of a past time.

moto keeps only the current state of a table, so its ExportTableToPointInTime can only
export "now". But the emulator runs every request under one lock, so after each write
request the rows it touched are exactly the rows it changed: their new images, stamped with
the time of the request, make a complete log. A table's state at T is then, per key, the
newest image logged at or before T.

The log starts when point-in-time recovery is enabled on a table (a snapshot of every row
then, as DynamoDB's recovery window starts at enabling), ends when it is disabled or the
table deleted, and keeps `LIKES_LOCAL_PITR_SECONDS` of history (DynamoDB's 35 days by
default): older images are dropped once a newer one is also older than the window.

As on AWS, the window ends some time behind now (`lag`, about 5 minutes on AWS; the
emulator's `--pitr-lag-seconds`): DescribeContinuousBackups reports it, and an export after
it is refused.
"""

import base64
import json
import os
import time
from collections import deque
from decimal import Decimal

PITR_WINDOW_SECONDS = float(os.environ.get("LIKES_LOCAL_PITR_SECONDS", 35 * 24 * 3600))

# Writes whose touched keys the request names.
KEYED_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
# PartiQL writes name their keys inside a statement: every logged table is compared instead.
STATEMENT_WRITES = {"ExecuteStatement", "BatchExecuteStatement", "ExecuteTransaction"}


def key_value(value):
    """A key attribute's DynamoDB JSON as a hashable value; numbers compared as numbers."""
    (kind, raw), = value.items()
    if kind == "N":
        raw = str(Decimal(raw).normalize())
    return kind, raw


class TableLog:
    """Every image of every row of one table since its log began."""

    def __init__(self, table, started_at, lag):
        self.started_at = started_at
        self.lag = lag
        self.hash_attr = table.hash_key_attr
        self.range_attr = table.range_key_attr
        # key -> deque of (time, image JSON or None once deleted), oldest first.
        self.versions = {}
        for item in table.all_items():
            attrs = item.to_json()["Attributes"]
            self.versions[self.key_of(attrs)] = deque([(started_at, image_text(attrs))])

    def key_of(self, attrs):
        return (
            key_value(attrs[self.hash_attr]),
            key_value(attrs[self.range_attr]) if self.range_attr else None,
        )

    def earliest(self, now):
        return max(self.started_at, now - PITR_WINDOW_SECONDS)

    def latest(self, now):
        """The latest restorable time: `lag` behind now, never before the window starts."""
        return max(self.started_at, now - self.lag)

    def record(self, key, image, now):
        versions = self.versions.setdefault(key, deque())
        current = versions[-1][1] if versions else None
        if image == current:
            return  # a failed condition, or a write that changed nothing
        versions.append((now, image))
        # The newest image older than the window is the row's state at its start: keep it.
        cutoff = now - PITR_WINDOW_SECONDS
        while len(versions) > 1 and versions[1][0] <= cutoff:
            versions.popleft()

    def as_of(self, at):
        """(key, image JSON text) of every row that existed at `at`, in key order."""
        rows = []
        for key in sorted(self.versions, key=lambda k: (k[0], k[1] or ("", ""))):
            image = None
            for logged_at, logged in self.versions[key]:
                if logged_at > at:
                    break
                image = logged
            if image is not None:
                rows.append((key, image))
        return rows


class PitrHistory:
    """The logs of every table with point-in-time recovery, per account and region."""

    def __init__(self, lag):
        self.lag = lag
        self.logs = {}  # (account, region, table name) -> TableLog

    def log(self, account, region, table):
        return self.logs.get((account, region, table.name))

    def observe(self, request, backend):
        """Called after moto handled `request` (a DynamoDB request), under the lock."""
        operation, body = request.operation, request.body
        if operation == "UpdateContinuousBackups":
            self._follow_recovery(request, backend)
        elif operation == "DeleteTable":
            self.logs.pop((request.account, request.region, body.get("TableName")), None)
        elif operation in KEYED_WRITES:
            for table_name, key_attrs in touched_keys(operation, body):
                self._record(request, backend, table_name, key_attrs)
        elif operation in STATEMENT_WRITES:
            self._record_every_change(request, backend)

    def _follow_recovery(self, request, backend):
        name = request.body.get("TableName")
        log_key = (request.account, request.region, name)
        try:
            table = backend.get_table(name)
        except Exception:  # moto already answered the client with the error
            return
        enabled = (
            table.continuous_backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"]
            == "ENABLED"
        )
        if enabled and log_key not in self.logs:
            self.logs[log_key] = TableLog(table, time.time(), self.lag)
        elif not enabled:
            # DynamoDB drops a table's recovery window when recovery is turned off.
            self.logs.pop(log_key, None)

    def _table_and_log(self, request, backend, table_name):
        try:
            table = backend.get_table(table_name)
        except Exception:
            return None, None
        return table, self.logs.get((request.account, request.region, table.name))

    def _record(self, request, backend, table_name, key_attrs):
        table, log = self._table_and_log(request, backend, table_name)
        if log is None:
            return
        try:
            key = log.key_of(key_attrs)
        except (KeyError, ValueError, AttributeError):
            return  # a malformed key: moto refused the request
        item = table.get_item(*moto_key(table, key_attrs))
        image = image_text(item.to_json()["Attributes"]) if item is not None else None
        log.record(key, image, time.time())

    def _record_every_change(self, request, backend):
        now = time.time()
        for (account, region, name), log in self.logs.items():
            if (account, region) != (request.account, request.region) or name not in backend.tables:
                continue
            current = {}
            for item in backend.tables[name].all_items():
                attrs = item.to_json()["Attributes"]
                current[log.key_of(attrs)] = image_text(attrs)
            for key in set(log.versions) | set(current):
                log.record(key, current.get(key), now)


def image_text(attrs):
    """A row's image as an export's data line holds it: compact DynamoDB JSON, binary values
    in base64 (moto keeps a binary set's members as bytes once an ADD has merged them)."""
    return json.dumps(attrs, separators=(",", ":"), default=base64_text)


def base64_text(value):
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not a DynamoDB JSON value")


def moto_key(table, key_attrs):
    from moto.dynamodb.models.dynamo_type import DynamoType

    hash_value = DynamoType(key_attrs[table.hash_key_attr])
    range_value = DynamoType(key_attrs[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


def touched_keys(operation, body):
    """(table name, key attributes) of every row a keyed write request may have changed; the
    whole item stands in for its key (only the key attributes are read from it)."""
    if operation == "PutItem":
        yield body.get("TableName"), body.get("Item", {})
    elif operation in ("UpdateItem", "DeleteItem"):
        yield body.get("TableName"), body.get("Key", {})
    elif operation == "BatchWriteItem":
        for table_name, requests in body.get("RequestItems", {}).items():
            for write in requests:
                if "PutRequest" in write:
                    yield table_name, write["PutRequest"].get("Item", {})
                elif "DeleteRequest" in write:
                    yield table_name, write["DeleteRequest"].get("Key", {})
    elif operation == "TransactWriteItems":
        for entry in body.get("TransactItems", []):
            for kind, write in entry.items():
                if kind == "Put":
                    yield write.get("TableName"), write.get("Item", {})
                elif kind in ("Update", "Delete"):
                    yield write.get("TableName"), write.get("Key", {})
