"""ExportTableToPointInTime, DescribeExport and ListExports as DynamoDB answers them.

moto's own export writes one data file of the table as it is now, no manifests, no
`_started`, and an ARN that is not an export's. These answer instead, with an export of the
table as of `ExportTime` (from `pitr_history`), in DynamoDB's layout:

    <S3Prefix>/AWSDynamoDB/<ExportId>/_started                   at once
    <S3Prefix>/AWSDynamoDB/<ExportId>/data/<name>.json.gz        on completion, one per
                                                                 "partition", some empty
    <S3Prefix>/AWSDynamoDB/<ExportId>/manifest-files.json (.md5)
    <S3Prefix>/AWSDynamoDB/<ExportId>/manifest-summary.json (.md5)   written last

An export stays IN_PROGRESS for `LIKES_LOCAL_EXPORT_SECONDS` (2 by default; about ten
minutes on AWS), so callers meet the wait they must handle, then completes: its objects are
written into moto's S3 backend in-process, in the caller's account, and DescribeExport
reports COMPLETED with the item count and the manifest's key.
"""

import base64
import gzip
import hashlib
import json
import os
import secrets
import threading
import time
import uuid
from datetime import datetime, timezone

EXPORT_SECONDS = float(os.environ.get("LIKES_LOCAL_EXPORT_SECONDS", "2"))
# Data files per export: DynamoDB writes at least one per partition, empty ones included.
PARTITIONS = 4
OPERATIONS = {"ExportTableToPointInTime", "DescribeExport", "ListExports", "DescribeContinuousBackups"}
LIST_EXPORTS_MAX = 25


class ExportError(Exception):
    """A DynamoDB error answer: its type (after the `#`) and message."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def iso_millis(epoch_seconds):
    moment = datetime.fromtimestamp(epoch_seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def md5_base64(data):
    return base64.b64encode(hashlib.md5(data).digest()).decode()


class LocalExport:
    def __init__(self, request, table, export_time, rows):
        body = request.body
        self.account, self.region = request.account, request.region
        self.started_at = time.time()
        self.export_id = f"{int(self.started_at * 1000):014d}-{secrets.token_hex(4)}"
        self.arn = f"{table.table_arn}/export/{self.export_id}"
        self.table_arn = table.table_arn
        # moto keeps no table id; a stable one per table ARN stands in.
        self.table_id = str(uuid.uuid5(uuid.NAMESPACE_URL, table.table_arn))
        self.export_time = export_time
        self.bucket = body["S3Bucket"]
        self.bucket_owner = body.get("S3BucketOwner")
        self.prefix = body.get("S3Prefix")
        self.sse = body.get("S3SseAlgorithm", "AES256")
        self.client_token = body.get("ClientToken")
        folder = f"AWSDynamoDB/{self.export_id}"
        self.folder = f"{self.prefix.rstrip('/')}/{folder}" if self.prefix else folder
        self.rows = rows  # (key, image JSON text), dropped once written
        self.status = "IN_PROGRESS"
        self.ended_at = None
        self.item_count = None
        self.billed_bytes = None
        self.failure = None  # (code, message)

    def s3(self):
        from moto.s3.models import s3_backends

        return s3_backends[self.bucket_owner or self.account]["aws"]

    def start(self):
        # `_started` proves the bucket writable before any work, as DynamoDB does.
        try:
            self.s3().put_object(self.bucket, f"{self.folder}/_started", b"")
        except Exception as err:  # moto's MissingBucket / AccessDenied
            self.fail("S3NoSuchBucket", f"{type(err).__name__}: {err}")

    def fail(self, code, message):
        self.status, self.failure, self.rows = "FAILED", (code, message), None
        self.ended_at = time.time()

    def complete(self):
        s3 = self.s3()
        files = [[] for _ in range(PARTITIONS)]
        for (partition_key, _), image in self.rows:
            # A file per hash range of the partition key, as DynamoDB writes one per
            # partition: small tables leave some of them empty.
            digest = hashlib.md5(repr(partition_key).encode()).digest()
            files[digest[0] % PARTITIONS].append(image)
        manifest_lines = []
        billed = 0
        for rows in files:
            text = "".join(f'{{"Item":{image}}}\n' for image in rows).encode()
            billed += len(text)
            data = gzip.compress(text, mtime=0)
            name = base64.b32encode(secrets.token_bytes(16)).decode().rstrip("=").lower()[:26]
            key = f"{self.folder}/data/{name}.json.gz"
            stored = s3.put_object(self.bucket, key, data)
            manifest_lines.append(json.dumps({
                "itemCount": len(rows),
                "md5Checksum": md5_base64(data),
                "etag": stored.etag.strip('"'),
                "dataFileS3Key": key,
            }))
        self.ended_at = time.time()
        self.item_count = len(self.rows)
        self.billed_bytes = billed
        files_key = f"{self.folder}/manifest-files.json"
        self._put_with_md5(s3, files_key, "".join(line + "\n" for line in manifest_lines).encode())
        summary = {
            "version": "2020-06-30",
            "exportArn": self.arn,
            "startTime": iso_millis(self.started_at),
            "endTime": iso_millis(self.ended_at),
            "tableArn": self.table_arn,
            "tableId": self.table_id,
            "exportTime": iso_millis(self.export_time),
            "s3Bucket": self.bucket,
            "s3Prefix": self.prefix,
            "s3SseAlgorithm": self.sse,
            "s3SseKmsKeyId": None,
            "manifestFilesS3Key": files_key,
            "billedSizeBytes": billed,
            "itemCount": self.item_count,
            "outputFormat": "DYNAMODB_JSON",
        }
        # The summary last: readers take it as the sign the export is whole.
        self._put_with_md5(s3, self.manifest_key(), json.dumps(summary).encode())
        self.status, self.rows = "COMPLETED", None

    def _put_with_md5(self, s3, key, data):
        s3.put_object(self.bucket, key, data)
        s3.put_object(self.bucket, key[: -len(".json")] + ".md5", md5_base64(data).encode())

    def manifest_key(self):
        return f"{self.folder}/manifest-summary.json"

    def description(self):
        described = {
            "ExportArn": self.arn,
            "ExportStatus": self.status,
            "StartTime": self.started_at,
            "TableArn": self.table_arn,
            "ExportTime": self.export_time,
            "S3Bucket": self.bucket,
            "S3SseAlgorithm": self.sse,
            "ExportFormat": "DYNAMODB_JSON",
            "ExportType": "FULL_EXPORT",
        }
        described["TableId"] = self.table_id
        optional = {
            "ClientToken": self.client_token,
            "S3BucketOwner": self.bucket_owner,
            "S3Prefix": self.prefix,
            "EndTime": self.ended_at,
        }
        described.update({name: value for name, value in optional.items() if value is not None})
        if self.status == "COMPLETED":
            described.update({
                "ExportManifest": self.manifest_key(),
                "ItemCount": self.item_count,
                "BilledSizeBytes": self.billed_bytes,
            })
        if self.failure:
            described["FailureCode"], described["FailureMessage"] = self.failure
        return described


class TableExports:
    """The export operations, answered in place of moto's. Every method runs under `lock`,
    the emulator's one lock; completion timers take it too."""

    def __init__(self, lock, history):
        self.lock = lock
        self.history = history
        self.exports = {}  # ARN -> LocalExport, in start order
        self.by_token = {}  # ClientToken -> LocalExport

    def answer(self, request, backend):
        """The JSON answer to an export operation, or raises ExportError."""
        if request.operation == "ExportTableToPointInTime":
            return {"ExportDescription": self._start(request, backend).description()}
        if request.operation == "DescribeContinuousBackups":
            return self._continuous_backups(request, backend)
        if request.operation == "DescribeExport":
            export = self.exports.get(request.body.get("ExportArn"))
            if export is None or export.account != request.account:
                raise ExportError("ExportNotFoundException", "Export not found")
            self._complete_if_due(export)
            return {"ExportDescription": export.description()}
        return self._list(request)

    def _start(self, request, backend):
        body = request.body
        token = body.get("ClientToken")
        if token and token in self.by_token:
            return self.by_token[token]
        for name, supported in (("ExportFormat", "DYNAMODB_JSON"), ("ExportType", "FULL_EXPORT")):
            if body.get(name, supported) != supported:
                raise ExportError(
                    "ValidationException",
                    f"The local emulator exports {name} {supported} only, not {body[name]}",
                )
        if not body.get("S3Bucket"):
            raise ExportError("ValidationException", "1 validation error detected: S3Bucket is required")
        table_arn = body.get("TableArn", "")
        table = next((t for t in backend.tables.values() if t.table_arn == table_arn), None)
        if table is None:
            raise ExportError("TableNotFoundException", f"Table not found: {table_arn}")
        log = self.history.log(request.account, request.region, table)
        if log is None:
            raise ExportError(
                "PointInTimeRecoveryUnavailableException",
                f"Point in time recovery is not enabled for table '{table.name}'",
            )
        now = time.time()
        latest = log.latest(now)
        export_time = float(body.get("ExportTime", latest))
        earliest = log.earliest(now)
        if export_time > latest:
            raise ExportError(
                "InvalidExportTimeException",
                f"ExportTime {iso_millis(export_time)} is after the latest restorable time "
                f"of table '{table.name}', {iso_millis(latest)}",
            )
        if export_time < earliest:
            raise ExportError(
                "InvalidExportTimeException",
                f"ExportTime {iso_millis(export_time)} is outside of the point in time recovery "
                f"window of table '{table.name}', which starts at {iso_millis(earliest)}",
            )
        export = LocalExport(request, table, export_time, log.as_of(export_time))
        export.start()
        self.exports[export.arn] = export
        if token:
            self.by_token[token] = export
        if export.status == "IN_PROGRESS":
            timer = threading.Timer(EXPORT_SECONDS, self._complete_locked, args=(export,))
            timer.daemon = True
            timer.start()
        return export

    def _continuous_backups(self, request, backend):
        """moto's answer, with the recovery window this emulator can really export."""
        name = request.body.get("TableName", "")
        table = next(
            (t for t in backend.tables.values() if name in (t.name, t.table_arn)), None
        )
        if table is None:
            raise ExportError("TableNotFoundException", f"Table not found: {name}")
        log = self.history.log(request.account, request.region, table)
        if log is None:
            recovery = {"PointInTimeRecoveryStatus": "DISABLED"}
        else:
            now = time.time()
            recovery = {
                "PointInTimeRecoveryStatus": "ENABLED",
                "EarliestRestorableDateTime": log.earliest(now),
                "LatestRestorableDateTime": log.latest(now),
                "RecoveryPeriodInDays": 35,
            }
        return {
            "ContinuousBackupsDescription": {
                "ContinuousBackupsStatus": "ENABLED",
                "PointInTimeRecoveryDescription": recovery,
            }
        }

    def _complete_locked(self, export):
        with self.lock:
            self._complete_if_due(export)

    def _complete_if_due(self, export):
        if export.status != "IN_PROGRESS" or time.time() < export.started_at + EXPORT_SECONDS:
            return
        try:
            export.complete()
        except Exception as err:  # the bucket was deleted meanwhile, say
            export.fail("UNKNOWN", f"{type(err).__name__}: {err}")

    def _list(self, request):
        body = request.body
        table_arn = body.get("TableArn")
        limit = min(int(body.get("MaxResults", LIST_EXPORTS_MAX)), LIST_EXPORTS_MAX)
        start = int(body.get("NextToken") or 0)
        matching = [
            export for export in self.exports.values()
            if export.account == request.account
            and export.region == request.region
            and (table_arn is None or export.table_arn == table_arn)
        ]
        for export in matching:
            self._complete_if_due(export)
        page = matching[start:start + limit]
        answer = {
            "ExportSummaries": [
                {"ExportArn": e.arn, "ExportStatus": e.status, "ExportType": "FULL_EXPORT"}
                for e in page
            ]
        }
        if start + limit < len(matching):
            answer["NextToken"] = str(start + limit)
        return answer
