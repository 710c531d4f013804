#!/usr/bin/env python3
"""Offline AWS emulator for the Likes local stack: moto's server app behind one lock.

    .venv/bin/python local/emulator/emulator.py [--host 127.0.0.1] [--port 0] [--parent-pid PID]

Prints exactly one line on stdout once the socket listens, then nothing more:

    LIKES_EMULATOR_READY http://127.0.0.1:<port>

Everything is moto's except ExportTableToPointInTime, DescribeExport and ListExports,
which export a table as of the requested time in DynamoDB's layout (table_exports.py,
from the write log of pitr_history.py), DescribeContinuousBackups, which reports that
log's window (its end `--pitr-lag-seconds` behind now, as AWS keeps it), and Athena's
query operations, which run each query in DuckDB over the S3 objects of its tables
(local_athena.py). A few behaviours are AWS's instead of moto's (each patch says how they
differ), and `LikesEmulator.SplitStreamShards` splits a DynamoDB stream's shards, which
AWS does on its own and has no API for. Every DynamoDB and Kinesis request is priced as
AWS bills it (billing.py), and `LikesEmulator.Usage` answers the bill so far.

Errors go to stderr, tersely; there is no per-request access log. SIGTERM and SIGINT
stop it cleanly, and with --parent-pid it also stops when that process is gone, so a
test run that crashes never leaves an emulator behind.
"""

import argparse
import base64
import copy
import functools
import hashlib
import inspect
import io
import json
import logging
import os
import re
import signal
import sys
import threading
import time

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

from billing import Bill, bill_what_searches_evaluate
from local_athena import OPERATIONS as ATHENA_OPERATIONS, TARGET as ATHENA_TARGET, AthenaError, LocalAthena
from pitr_history import PitrHistory
from table_exports import OPERATIONS as EXPORT_OPERATIONS, ExportError, TableExports

READY = "LIKES_EMULATOR_READY"
PARENT_POLL_SECONDS = 0.5
DYNAMODB_TARGET = "DynamoDB_20120810."
DYNAMODB_ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"
EMULATOR_TARGET = "LikesEmulator."
KINESIS_TARGET = "Kinesis_20131202."
STREAMS_TARGET = "DynamoDBStreams_20120810."
# moto's own rules for whose backend a request reaches (moto.core.responses.BaseResponse).
ACCESS_KEY = re.compile(r"AWS.*(?P<access_key>(?<![A-Z0-9])[A-Z0-9]{20}(?![A-Z0-9]))[:/]")
DEFAULT_REGION = "us-east-1"


class JsonRequest:
    """An AWS JSON-protocol request (X-Amz-Target): its operation, body, and the account and
    region whose backend moto serves it from."""

    def __init__(self, environ, operation):
        self.operation = operation
        raw = environ["wsgi.input"].getvalue()
        self.body = json.loads(raw) if raw else {}
        authorization = environ.get("HTTP_AUTHORIZATION", "")
        scope = authorization.split(",")[0].split("/")
        self.region = scope[2] if "AWS4" in authorization and len(scope) > 2 else DEFAULT_REGION
        self.account = os.environ.get("MOTO_ACCOUNT_ID") or environ.get("HTTP_X_MOTO_ACCOUNT_ID")
        if not self.account:
            from moto.iam.models import get_account_id_from

            match = ACCESS_KEY.search(authorization)
            self.account = get_account_id_from(match.group("access_key") if match else "AKIAEXAMPLE")

    @classmethod
    def parse(cls, environ, prefix):
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(prefix):
            return None
        try:
            return cls(environ, target[len(prefix):])
        except ValueError:
            return None  # not JSON: moto answers it with its own error

    def backend(self):
        from moto.dynamodb.models import dynamodb_backends

        return dynamodb_backends[self.account][self.region]


def json_answer(start_response, status, document, content_type="application/x-amz-json-1.0"):
    body = json.dumps(document).encode()
    start_response(status, [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("x-amzn-RequestId", os.urandom(16).hex()),
    ])
    return [body]


class SerializedApp:
    """Runs every request, start to finish, under one global lock.

    Why: stock moto_server serves each request on its own thread, but its DynamoDB
    backend reads the item, parses and evaluates the ConditionExpression, then
    writes, with no lock around those steps. Two conditional writes on one key can
    therefore both pass the condition. Measured with moto 5.2.5: 16 threads racing
    the write path's conditional UpdateItem on one key got two winners (and a lost
    `op_id` bump) in 54 of 300 rounds against stock moto_server, and in 0 of 300
    behind this lock. DynamoDB guarantees exactly one winner, and both the write
    path's idempotency (conditional UpdateItem) and the aggregator's claims
    (TransactWriteItems) depend on it: without the lock their tests prove nothing.
    One lock for the whole app, not one per table, also makes a transaction atomic
    against every other request, as on AWS. It costs about 5% of throughput.

    The request body is read before taking the lock, so a slow or stalled client
    cannot block everyone else; the response body is iterated and closed under it,
    since a WSGI app may still be doing work while its body is consumed.

    The lock also makes point-in-time exports possible: after each DynamoDB request, the
    rows it touched are logged (pitr_history), and the export operations are answered
    from that log in DynamoDB's layout (table_exports) instead of by moto.
    """

    def __init__(self, app, pitr_lag):
        self._app = app
        self._lock = threading.Lock()
        self._history = PitrHistory(pitr_lag)
        self._exports = TableExports(self._lock, self._history)
        self._athena = LocalAthena(self._lock)
        self._bill = Bill()

    def __call__(self, environ, start_response):
        length = environ.get("CONTENT_LENGTH")
        if length and not environ.get("wsgi.input_terminated"):
            environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read(int(length)))
        elif environ.get("wsgi.input_terminated"):
            environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read())
        else:
            environ["wsgi.input"] = io.BytesIO(b"")
        with self._lock:
            dynamo = JsonRequest.parse(environ, DYNAMODB_TARGET)
            if dynamo is not None and dynamo.operation in EXPORT_OPERATIONS:
                return self._answer_export(dynamo, start_response)
            athena = JsonRequest.parse(environ, ATHENA_TARGET)
            if athena is not None and athena.operation in ATHENA_OPERATIONS:
                return self._answer_athena(athena, start_response)
            local = JsonRequest.parse(environ, EMULATOR_TARGET)
            if local is not None:
                return self._answer_local(local, start_response)
            kinesis = JsonRequest.parse(environ, KINESIS_TARGET)
            nothing_new = nothing_to_read(JsonRequest.parse(environ, STREAMS_TARGET), kinesis)
            if nothing_new is not None:
                return json_answer(start_response, "200 OK", *nothing_new)
            touches = self._bill_before(dynamo)
            status = []

            def answering(code, headers, exc_info=None):
                status.append(int(code.split()[0]))
                return start_response(code, headers, exc_info)

            body = self._app(environ, answering)
            answer = b""
            try:
                answer = b"".join(body)
                return [answer]
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()
                if dynamo is not None:
                    self._observe(dynamo)
                    self._bill_served(dynamo, touches, status, answer)
                if kinesis is not None and status:
                    self._bill.put_records(kinesis, status[0])

    def _observe(self, dynamo):
        # Still under the lock: what this request changed is all that changed since the last.
        try:
            self._history.observe(dynamo, dynamo.backend())
        except Exception:
            # The write stands; only exports as of this moment may now be wrong. Say so loudly.
            logging.getLogger("emulator.pitr").exception("point-in-time log missed %s", dynamo.operation)

    def _bill_before(self, dynamo):
        if dynamo is None:
            return None
        try:
            return self._bill.before(dynamo, dynamo.backend())
        except Exception as err:
            logging.getLogger("emulator.billing").exception("could not price %s", dynamo.operation)
            self._bill.missed(dynamo.operation, err)
            return None

    def _bill_served(self, dynamo, touches, status, answer):
        # Still under the lock: the items are as this request left them.
        try:
            document = json.loads(answer) if answer else {}
            self._bill.served(dynamo, dynamo.backend(), touches, status[0], document)
        except Exception as err:
            # The request stands; only the bill misses it. Say so loudly, and in the bill.
            logging.getLogger("emulator.billing").exception("could not bill %s", dynamo.operation)
            self._bill.missed(dynamo.operation, err)

    def _answer_export(self, dynamo, start_response):
        """Exports as of a past time, in DynamoDB's layout (table_exports), not moto's."""
        try:
            answer = self._exports.answer(dynamo, dynamo.backend())
        except ExportError as err:
            return json_answer(start_response, "400 Bad Request", {
                "__type": DYNAMODB_ERROR_PREFIX + err.kind,
                "message": err.message,
            })
        return json_answer(start_response, "200 OK", answer)


    def _answer_local(self, request, start_response):
        """The emulator's own operations, for what AWS does on its own and has no API for."""
        try:
            if request.operation == "SplitStreamShards":
                answer = split_stream_shards(request.body)
            elif request.operation == "Usage":
                answer = self._bill.usage()
            else:
                raise ValueError(f"no operation {request.operation}")
        except (ValueError, KeyError) as err:
            return json_answer(start_response, "400 Bad Request", {"__type": "ValidationException", "message": str(err)})
        return json_answer(start_response, "200 OK", answer)

    def _answer_athena(self, request, start_response):
        """Queries run for real (local_athena), not moto's empty successes."""
        content_type = "application/x-amz-json-1.1"
        try:
            answer = self._athena.answer(request)
        except AthenaError as err:
            return json_answer(start_response, "400 Bad Request", {
                "__type": err.kind,
                "Message": err.message,
            }, content_type)
        return json_answer(start_response, "200 OK", answer, content_type)


def nothing_to_read(streams, kinesis):
    """A GetRecords that finds nothing new, answered without moto's dispatch.

    Every event source mapping polls its shards whether or not anything was written (a
    DynamoDB stream shard four times a second, a Kinesis shard once a second), so most of
    a quiet stack's requests are reads that find nothing, and moto's dispatch and answer
    serialization (Flask, its request parsing, botocore's output model) cost several times
    what the read does. A read that finds records, or fails, is answered by moto as before;
    the read it repeats has no effect on the shard (it only names the next iterator).
    Returns the answer and its content type, or None for moto to answer.
    """
    try:
        if streams is not None and streams.operation == "GetRecords":
            from moto.dynamodbstreams.models import dynamodbstreams_backends

            backend = dynamodbstreams_backends[streams.account][streams.region]
            answer = backend.get_records(streams.body["ShardIterator"], streams.body.get("Limit") or 1000)
            return (answer, "application/x-amz-json-1.0") if not answer["Records"] else None
        if kinesis is not None and kinesis.operation == "GetRecords":
            from moto.kinesis.models import kinesis_backends

            backend = kinesis_backends[kinesis.account][kinesis.region]
            after, records, behind = backend.get_records(
                kinesis.body.get("StreamARN"), kinesis.body["ShardIterator"], kinesis.body.get("Limit")
            )
            # A closed shard read to its end names no next iterator (moto leaves out None).
            answer = {"Records": [], "MillisBehindLatest": behind}
            if after is not None:
                answer["NextShardIterator"] = after
            return (answer, "application/x-amz-json-1.1") if not records else None
    except Exception:
        return None  # moto reads it again, and answers the error its own way
    return None


class QuietRequestHandler(MotoRequestHandler):
    """moto's handler (it keeps underscored S3 metadata headers), minus the access log."""

    def log_request(self, code="-", size="-"):
        pass


def watch_parent(pid):
    """Send ourselves SIGTERM once `pid` no longer exists (or became a zombie)."""

    def alive():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
        except OSError:
            return True  # no /proc: trust kill(0)

    while alive():
        time.sleep(PARENT_POLL_SECONDS)
    print(f"emulator: parent {pid} is gone, stopping", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


def stop(signum, frame):
    # Raised in the main thread, this unwinds serve_forever(); main() closes the socket.
    raise SystemExit(0)


def roll_transactions_back_in_place():
    """A cancelled TransactWriteItems puts back what it touched, and nothing else moves.

    moto 5 rolls a cancelled transaction back by deep-copying every table it names before
    it starts (DynamoDBBackend.transact_write_items) and putting the copies in their place.
    That has two costs. Every transaction copies whole tables: the Leaderboard table holds a
    claim per event and the Counts table every count row, so each transaction cost more as a
    run went on (a test putting 2,000 likes slowed from 20 to 10 writes a second). And each
    copy brings a copy of the table's stream shard, so every open shard iterator (a stream
    poller's) kept reading the discarded shard: it saw the records of the writes that were
    rolled back, and never another record of that table. DynamoDB writes nothing to a stream
    for a cancelled transaction.

    Here the live tables stay in place: the items the transaction names are copied before
    it, and if it is cancelled they are put back and the tables' stream shards cut back to
    the records they held. The emulator's lock makes that atomic.
    """
    import moto.dynamodb.models as models
    from moto.dynamodb.models.dynamo_type import DynamoType
    from moto.dynamodb.models.table import Table

    moto_transaction = models.DynamoDBBackend.transact_write_items

    class KeepTables:
        """moto's `copy` module, as the transaction sees it: tables are not copied."""

        @staticmethod
        def deepcopy(value, memo=None):
            return value if isinstance(value, Table) else copy.deepcopy(value, memo)

    def named_items(backend, transact_items):
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = backend.tables.get(op.get("TableName"))
            attrs = op.get("Key") or op.get("Item") or {}
            if table is None or table.hash_key_attr not in attrs:
                continue
            if table.range_key_attr and table.range_key_attr not in attrs:
                continue
            hash_key = DynamoType(attrs[table.hash_key_attr])
            range_key = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
            yield table, hash_key, range_key

    def put_back(table, hash_key, range_key, item):
        rows = table.items[hash_key] if range_key is not None else table.items
        slot = range_key if range_key is not None else hash_key
        if item is None:
            rows.pop(slot, None)
        else:
            rows[slot] = item

    def transact_write_items(self, transact_items):
        before = [
            (table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key)))
            for table, hash_key, range_key in named_items(self, transact_items)
        ]
        tables = {id(table): table for table, *_ in before}.values()
        shards = [(shard, len(shard.items)) for t in tables for shard in open_stream_shards(t)]
        models.copy = KeepTables
        try:
            return moto_transaction(self, transact_items)
        except Exception:
            # Newest first, so a key named twice ends as it was before the first.
            for table, hash_key, range_key, item in reversed(before):
                put_back(table, hash_key, range_key, item)
            for shard, held in shards:
                del shard.items[held:]
            raise
        finally:
            models.copy = copy

    models.DynamoDBBackend.transact_write_items = transact_write_items


KEY_SPACE = 2**128
# Children of a split number their records from here on, one band of this many each, so no
# two shards of a stream ever share a sequence number.
SEQUENCE_BAND = 10**15


class StreamShards:
    """Every shard of one table's stream, open and closed: what stands for moto's one
    `table.stream_shard` once the stream has split. Each shard holds a range of the md5 of
    the partition key, as a DynamoDB partition holds a range of keys; a record goes to the
    open shard whose range holds its key."""

    def __init__(self, first):
        first.key_range = (0, KEY_SPACE)
        self.table = first.table
        self.created_on = first.created_on
        self.shards = [first]

    def open(self):
        return [s for s in self.shards if getattr(s, "ending_sequence_number", None) is None]

    def find(self, shard_id):
        return next((s for s in self.shards if s.id == shard_id), None)

    def add(self, old, new):
        record = old if old is not None else new
        key = int(hashlib.md5(str(record.hash_key.value).encode("utf-8")).hexdigest(), 16)
        next(s for s in self.open() if s.key_range[0] <= key < s.key_range[1]).add(old, new)

    def split(self):
        """Closes every open shard and opens two children for it, each taking half of its
        range: the children's ids, by parent."""
        from moto.dynamodb.models.table import StreamShard

        base = max(s.starting_sequence_number + len(s.items) for s in self.shards)
        opened = {}
        for parent in self.open():
            parent.ending_sequence_number = parent.starting_sequence_number + len(parent.items) - 1
            low, high = parent.key_range
            middle = low + (high - low) // 2
            for key_range in ((low, middle), (middle, high)):
                child = StreamShard(self.table.account_id, self.table)
                child.id = f"shardId-{int(time.time() * 1000):020d}-{os.urandom(4).hex()}"
                child.parent_id = parent.id
                child.key_range = key_range
                child.starting_sequence_number = base
                base += SEQUENCE_BAND
                self.shards.append(child)
                opened.setdefault(parent.id, []).append(child.id)
        return opened


def open_stream_shards(table):
    """The shards of `table`'s stream that take new records."""
    shards = table.stream_shard
    if shards is None:
        return []
    return shards.open() if isinstance(shards, StreamShards) else [shards]


def split_dynamodb_streams_as_aws_does():
    """A DynamoDB stream's shards split and close over a table's life (AWS closes each after
    about four hours, and splits them as partitions split); a reader must finish a parent
    before its children. moto keeps one shard per table for ever, so nothing could see it.

    The emulator's own operation `LikesEmulator.SplitStreamShards` (`{"StreamArn": ...}`;
    AWS has no API for it) closes every open shard of the stream and opens two children for
    each. As on AWS, DescribeStream lists the closed parent with its EndingSequenceNumber and
    each child with its ParentShardId, the parent keeps its records, GetRecords on a closed
    shard read to its end answers no NextShardIterator, and new records go to the children.
    """
    from moto.dynamodb.exceptions import ResourceNotFoundException
    from moto.dynamodb.models.table import StreamShard
    from moto.dynamodbstreams.models import DynamoDBStreamsBackend, ShardIterator

    moto_shard_json = StreamShard.to_json
    moto_describe = DynamoDBStreamsBackend.describe_stream
    moto_iterator = DynamoDBStreamsBackend.get_shard_iterator
    moto_get = ShardIterator.get

    def shard_json(self):
        answer = moto_shard_json(self)
        if getattr(self, "parent_id", None):
            answer["ParentShardId"] = self.parent_id
        if getattr(self, "ending_sequence_number", None) is not None:
            answer["SequenceNumberRange"]["EndingSequenceNumber"] = str(self.ending_sequence_number)
        return answer

    def describe_stream(self, arn):
        table = self._get_table_from_arn(arn)
        shards = table.stream_shard
        if not isinstance(shards, StreamShards):
            return moto_describe(self, arn)
        table.stream_shard = shards.shards[0]  # what moto's answer is built from
        try:
            answer = moto_describe(self, arn)
        finally:
            table.stream_shard = shards
        answer["Shards"] = [s.to_json() for s in shards.shards]
        return answer

    def get_shard_iterator(self, arn, shard_id, shard_iterator_type, sequence_number=None):
        shards = self._get_table_from_arn(arn).stream_shard
        if not isinstance(shards, StreamShards):
            return moto_iterator(self, arn, shard_id, shard_iterator_type, sequence_number)
        shard = shards.find(shard_id)
        if shard is None:
            raise ResourceNotFoundException(f"shard {shard_id} is not in {arn}")
        iterator = ShardIterator(self, shard, shard_iterator_type, sequence_number)
        self.shard_iterators[iterator.arn] = iterator
        return iterator

    def get(self, limit=1000):
        answer = moto_get(self, limit)
        end = getattr(self.stream_shard, "ending_sequence_number", None)
        records = answer["Records"]
        read_to = int(records[-1]["dynamodb"]["SequenceNumber"]) if records else self.sequence_number - 1
        if end is not None and read_to >= end:
            del answer["NextShardIterator"]
        return answer

    StreamShard.to_json = shard_json
    DynamoDBStreamsBackend.describe_stream = describe_stream
    DynamoDBStreamsBackend.get_shard_iterator = get_shard_iterator
    ShardIterator.get = get


def split_stream_shards(body):
    """`LikesEmulator.SplitStreamShards`: see split_dynamodb_streams_as_aws_does."""
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    arn = body.get("StreamArn", "")
    parts = arn.split(":", 5)
    if len(parts) < 6:
        raise ValueError(f"not a stream ARN: {arn!r}")
    backend = dynamodbstreams_backends[parts[4]][parts[3]]
    table = backend._get_table_from_arn(arn)
    if table.stream_shard is None:
        raise ValueError(f"{arn} has no stream")
    if not isinstance(table.stream_shard, StreamShards):
        table.stream_shard = StreamShards(table.stream_shard)
    return {"Children": table.stream_shard.split()}


def list_moto_modules_once():
    # moto asks, for every request, whether the Host header names one of its service
    # packages, by listing its install directory and stat-ing each entry: a few hundred
    # system calls per request. The directory does not change while the server runs.
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules


def check_update_expressions_without_rebuilding_them():
    """An UpdateItem parses its expression once, and each check walks it knowing its own rules.

    moto parses an UpdateExpression twice per request (the handler, then the backend),
    and checks it with ten processors, each of which rebuilds its table of node kinds and
    their handlers for every node it visits (a test writing a thousand likes spent about 8%
    of its CPU time, emulator and test together, on that). Under this patch a parsed expression is kept
    by its text (the tree is never changed in place: every check works on its own deep
    copy, and the handler only reads it), and a processor builds its table once. What is
    parsed, checked, written and refused is unchanged.
    """
    from moto.dynamodb.parsing.ast_nodes import DepthFirstTraverser
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser

    UpdateExpressionParser.make = staticmethod(functools.lru_cache(maxsize=4096)(UpdateExpressionParser.make))

    def rules(traverser):
        try:
            return traverser._likes_rules
        except AttributeError:
            handlers = traverser._processing_map()
            traverser._likes_rules = (tuple(handlers), tuple(handlers.items()))
            return traverser._likes_rules

    def nodes_to_be_processed(self):
        return rules(self)[0]

    def process(self, node):
        for kind, processor in rules(self)[1]:
            if isinstance(node, kind):
                return processor(node)

    DepthFirstTraverser.nodes_to_be_processed = nodes_to_be_processed
    DepthFirstTraverser.process = process


def answer_item_operations_without_walking_the_model():
    """The item operations' answers are written as JSON directly.

    moto serializes every answer by walking the operation's output shape in botocore's
    model and looking each member up under several spellings: for a page of items, more
    than the Query itself costs, and about a fifth of what the emulator spends in all.
    The item operations' answers are already in the wire's shape (attribute values as
    DynamoDB's JSON), so under this patch they are written as they are, with the two
    things the model walk does to them: members that are None are left out, and binary
    values are base64-encoded. An answer holding anything else is serialized by moto.
    """
    from moto.core.responses import ActionResult

    execute_result = ActionResult.execute_result

    def encoded(raw):
        return base64.b64encode(raw.encode("utf-8") if isinstance(raw, str) else raw).decode("ascii")

    def value(attribute):
        ((kind, held),) = attribute.items()
        if kind == "B":
            return {kind: encoded(held)}
        if kind == "BS":
            return {kind: [encoded(raw) for raw in held]}
        if kind == "M":
            return {kind: item(held)}
        if kind == "L":
            return {kind: [value(member) for member in held]}
        return attribute

    def item(attributes):
        return {name: value(attribute) for name, attribute in attributes.items()}

    def items(listed):
        return [item(attributes) for attributes in listed]

    def unchanged(held):
        return held

    def responses(answered):
        if isinstance(answered, dict):
            return {table: items(listed) for table, listed in answered.items()}
        return [{"Item": item(got["Item"])} if "Item" in got else got for got in answered]

    members = {
        "Item": item,
        "Attributes": item,
        "LastEvaluatedKey": item,
        "Items": items,
        "Responses": responses,
        "Count": int,
        "ScannedCount": int,
        "ConsumedCapacity": unchanged,
        # What a batch left undone and item collection sizes: taken as they are while empty.
        "UnprocessedKeys": unchanged,
        "UnprocessedItems": unchanged,
        "ItemCollectionMetrics": unchanged,
    }
    only_empty = ("UnprocessedKeys", "UnprocessedItems", "ItemCollectionMetrics")

    @functools.wraps(execute_result)
    def answered_as_json(self, context):
        answer = self.result
        if (
            context.service_model.service_name != "dynamodb"
            or not isinstance(answer, dict)
            or not answer.keys() <= members.keys()
            or any(answer.get(name) for name in only_empty)
        ):
            return execute_result(self, context)
        body = {name: members[name](held) for name, held in answer.items() if held is not None}
        return 200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(body)

    ActionResult.execute_result = answered_as_json


def query_only_the_partition_it_names():
    """A Query costs the items of the partition it names, not a sort of the whole table.

    moto 5 answers every Query (of the table or of an index) by sorting every item of the
    table by its key, then keeping those whose key matches; it sorts what it keeps again
    before answering, by the table's or the index's full key. The first sort decides
    nothing, and on a table of a few thousand rows it is most of what a Query costs. Under
    this patch a Query of the table or of a local index walks only the partition its key
    condition names (a local index shares the table's partition key, so every item it could
    keep is there), and a Query of a global index walks every item, unsorted: what it
    answers, and in which order, is unchanged. Scan keeps moto's sorted walk, which its
    pages depend on.
    """
    from moto.dynamodb.models.table import Table

    query = Table.query
    signature = inspect.signature(query)

    def named_partition(table, call):
        index_name = call.arguments.get("index_name")
        if index_name is None:
            return call.arguments.get("hash_key")
        if any(index.name == index_name for index in table.indexes or ()):
            for name, value in call.arguments.get("hash_key_conditions") or ():
                if name == table.hash_key_attr:
                    return value
        return None

    def items_of(table, partition):
        if partition is None:
            stored = table.items.values()
        else:
            stored = [table.items[partition]] if partition in table.items else []
        for held in stored:
            if table.range_key_attr:
                yield from held.values()
            else:
                yield held

    @functools.wraps(query)
    def query_the_partition(self, *args, **kwargs):
        partition = named_partition(self, signature.bind(self, *args, **kwargs))
        # Under the emulator's lock: no other request sees the shadowed method.
        self.all_items = lambda: items_of(self, partition)
        try:
            return query(self, *args, **kwargs)
        finally:
            del self.all_items

    Table.query = query_the_partition


def read_kinesis_shards_by_position():
    """GetRecords and PutRecord(s) on a Kinesis shard cost the same however long it is.

    moto 5 keeps a shard's records in an ordered dict keyed by sequence number, and both
    finds the shard's last sequence number (on every record put) and the records after an
    iterator (on every GetRecords) by walking all of it: each put and each poll costs the
    shard's whole length. A local run's event log holds tens of thousands of events and
    several consumers poll each shard, so the emulator slowed down as the log grew (a test
    putting 2,000 likes on one item went from 20 to 12 writes a second). Its sequence
    numbers are 1, 2, 3... per shard, so the records after an iterator are found by
    position; a shard whose numbers are not that run is read moto's way.
    """
    from moto.kinesis.models import Shard

    walking_read = Shard.get_records

    def first(shard):
        return next(iter(shard.records), 0)

    def last(shard):
        return next(reversed(shard.records), 0)

    def get_records(self, last_sequence_id, limit):
        records = self.records
        if not records or last(self) - first(self) + 1 != len(records):
            return walking_read(self, last_sequence_id, limit)
        after = max(int(last_sequence_id), first(self) - 1)
        newest = last(self)
        take = newest - after if limit is None else min(limit, newest - after)
        results = [records[n] for n in range(after + 1, after + 1 + max(take, 0))]
        if not results:
            return [], int(last_sequence_id), 0
        behind = records[newest].created_at - results[-1].created_at
        return results, results[-1].sequence_number, int(behind * 1000)

    Shard.get_records = get_records
    Shard.get_min_sequence_number = first
    Shard.get_max_sequence_number = last


def reshard_kinesis_as_aws_does():
    """SplitShard closes the parent and opens two children; the parent keeps its records, and
    a reader of a closed shard gets no next iterator once it has read them all; new records
    go to the open shard whose hash range holds their key.

    moto moves a split shard's records into its children (so a consumer reads them twice,
    under new sequence numbers, and loses its place in the parent) and answers a
    NextShardIterator for ever, so a consumer never learns the parent is done and never
    starts the children; and it may still put new records on the closed parent. On AWS the parent's records stay readable until they expire, and
    GetRecords on a closed shard read to its end answers a null NextShardIterator.
    """
    from collections import OrderedDict

    from moto.kinesis.models import KinesisBackend, Stream
    from moto.kinesis.utils import decompose_shard_iterator

    moto_split = Stream.split_shard
    moto_get_records = KinesisBackend.get_records
    moto_shard_for_key = Stream.get_shard_for_key

    def get_shard_for_key(self, partition_key, explicit_hash_key):
        # moto's own checks first; it may pick a closed shard, which takes no records.
        shard = moto_shard_for_key(self, partition_key, explicit_hash_key)
        if shard is None or shard.is_open:
            return shard
        key = (
            int(explicit_hash_key)
            if explicit_hash_key
            else int(hashlib.md5(partition_key.encode("utf-8")).hexdigest(), 16)
        )
        return next(
            (s for s in self.shards.values() if s.is_open and s.starting_hash <= key <= s.ending_hash),
            None,
        )

    def split_shard(self, shard_to_split, new_starting_hash_key):
        shard = self.shards.get(shard_to_split)
        held = shard.records if shard is not None else None
        if shard is not None:
            shard.records = OrderedDict()  # nothing for moto to move
        try:
            moto_split(self, shard_to_split, new_starting_hash_key)
        finally:
            if shard is not None:
                shard.records = held

    def get_records(self, stream_arn, shard_iterator, limit):
        next_iterator, records, behind = moto_get_records(self, stream_arn, shard_iterator, limit)
        stream_name, shard_id, last_read = decompose_shard_iterator(shard_iterator)
        shard = self.describe_stream(stream_arn=stream_arn, stream_name=stream_name).get_shard(shard_id)
        read_to = records[-1].sequence_number if records else int(last_read)
        if not shard.is_open and read_to >= shard.get_max_sequence_number():
            next_iterator = None
        return next_iterator, records, behind

    Stream.split_shard = split_shard
    Stream.get_shard_for_key = get_shard_for_key
    KinesisBackend.get_records = get_records


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    parser.add_argument(
        "--pitr-lag-seconds", type=float, default=300.0,
        help="how far the latest restorable time stays behind now (AWS: about 5 minutes)",
    )
    args = parser.parse_args(argv)

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="emulator: %(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    list_moto_modules_once()
    check_update_expressions_without_rebuilding_them()
    answer_item_operations_without_walking_the_model()
    query_only_the_partition_it_names()
    bill_what_searches_evaluate()
    roll_transactions_back_in_place()
    read_kinesis_shards_by_position()
    reshard_kinesis_as_aws_does()
    split_dynamodb_streams_as_aws_does()
    app = SerializedApp(DomainDispatcherApplication(create_backend_app), args.pitr_lag_seconds)
    server = make_server(args.host, args.port, app, threaded=True, request_handler=QuietRequestHandler)
    host, port = server.server_address[:2]
    # moto builds some URLs (SQS queue URLs, S3 redirects) from MOTO_PORT.
    os.environ["MOTO_PORT"] = str(port)

    if args.parent_pid:
        threading.Thread(target=watch_parent, args=(args.parent_pid,), name="parent-watchdog", daemon=True).start()

    # The socket already listens (make_server binds and activates it), so a client
    # that connects right after reading this line is queued, not refused.
    print(f"{READY} http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except SystemExit:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
