"""What AWS would bill for every DynamoDB and Kinesis request the emulator serves.

moto answers ConsumedCapacity with fixed figures, whatever the items hold. The emulator
prices each request itself, by DynamoDB's published rules for item sizes and units, and
keeps the bill by resource and unit (`LikesEmulator.Usage` answers it), named as the
simulator names them: `table/<name>`, `table/<name>/index/<index>` and `stream/<name>`.
The two are separate implementations of the same rules, so a scenario billed the same on
both checks each.

- An item's size is its attribute names' UTF-8 bytes plus its values': a string's UTF-8
  bytes, a binary's bytes, a number's significant digits two to a byte plus one (and one
  for a minus sign), a boolean or null one byte, a set its members' sizes, a list or map
  3 bytes plus one per element (and a map its keys) plus its elements.
- A write costs its item's larger image (before or after) in 1 KB units, at least one; a
  transaction twice that on its table, a `ConditionCheck` twice the item it read. An index
  costs what its entry changed: nothing if the entry is neither there before nor after, or
  is left as it was; the entry's units when it is added, removed or rewritten in place
  (the larger image); both entries' when its index key moves.
- A write refused by its condition costs the item's size (at least one unit), and so does
  each item of a cancelled transaction.
- A read costs 4 KB units (at least one) of what it read, half that eventually consistent
  (every index read is): GetItem and each BatchGetItem key the item, a transaction's read
  twice it; Query and Scan the items they evaluated (before any filter or projection),
  summed, an index's as its entries project them.
- Kinesis: each record put (`RecordsIn`).
"""

import base64
import decimal
import functools
import inspect
import math
from collections import defaultdict

from pitr_history import moto_key

DYNAMODB_WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}
DYNAMODB_READS = {"GetItem", "BatchGetItem", "TransactGetItems", "Query", "Scan"}
KINESIS_PUTS = {"PutRecord", "PutRecords"}
WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
TRANSACTION_FACTOR = 2.0
NUMBERS = decimal.Context(prec=80)


def number_size(text):
    digits = NUMBERS.create_decimal(text).normalize(NUMBERS)
    if digits.is_zero():
        return 1
    sign, mantissa, exponent = digits.as_tuple()
    before_point = min(max(len(mantissa) + exponent, 0), len(mantissa))
    after_point = len(mantissa) - before_point
    return math.ceil(before_point / 2) + math.ceil(after_point / 2) + 1 + sign


def binary_size(value):
    # moto keeps a binary as base64 text, or as the bytes themselves once an ADD merged a set.
    return len(value) if isinstance(value, bytes) else len(base64.b64decode(value))


def value_size(value):
    (kind, raw), = value.items()
    if kind == "S":
        return len(raw.encode())
    if kind == "N":
        return number_size(raw)
    if kind == "B":
        return binary_size(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(member.encode()) for member in raw)
    if kind == "NS":
        return sum(number_size(member) for member in raw)
    if kind == "BS":
        return sum(binary_size(member) for member in raw)
    if kind == "L":
        return 3 + len(raw) + sum(value_size(element) for element in raw)
    if kind == "M":
        return 3 + sum(len(name.encode()) + 1 + value_size(element) for name, element in raw.items())
    raise ValueError(f"no DynamoDB type {kind}")


def item_size(attrs):
    return sum(len(name.encode()) + value_size(value) for name, value in attrs.items())


def write_units(size):
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size, consistent):
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return units if consistent else units / 2


def table_resource(name):
    return f"table/{name}"


def index_resource(table, index):
    return f"table/{table}/index/{index}"


class Index:
    """A secondary index: its key attributes and the attributes its entries hold."""

    def __init__(self, index, table):
        self.name = index.name
        self.keys = [key["AttributeName"] for key in index.schema]
        projection = index.projection or {}
        self.projects_all = projection.get("ProjectionType", "ALL") == "ALL"
        table_keys = [table.hash_key_attr] + ([table.range_key_attr] if table.range_key_attr else [])
        self.projected = set(self.keys) | set(table_keys) | set(projection.get("NonKeyAttributes", []))

    def entry(self, attrs):
        """The index's entry for an item (`None` when the item lacks an index key: a
        sparse index leaves it out)."""
        if attrs is None or any(key not in attrs for key in self.keys):
            return None
        if self.projects_all:
            return attrs
        return {name: value for name, value in attrs.items() if name in self.projected}

    def write_units(self, before, after):
        """What a write costs the index: `None` when its entry did not change."""
        old, new = self.entry(before), self.entry(after)
        if old is None and new is None:
            return None
        if old is None or new is None:
            return write_units(item_size(old if new is None else new))
        if any(canonical(old[key]) != canonical(new[key]) for key in self.keys):
            return write_units(item_size(old)) + write_units(item_size(new))
        if canonical_item(old) == canonical_item(new):
            return None
        return max(write_units(item_size(old)), write_units(item_size(new)))


def canonical(value):
    """A value compared as DynamoDB compares it: sets without order, numbers as numbers,
    binaries as bytes."""
    (kind, raw), = value.items()
    if kind == "N":
        return kind, NUMBERS.create_decimal(raw).normalize(NUMBERS)
    if kind == "B":
        return kind, raw if isinstance(raw, bytes) else base64.b64decode(raw)
    if kind in ("SS", "NS", "BS"):
        member = {"SS": "S", "NS": "N", "BS": "B"}[kind]
        return kind, frozenset(canonical({member: m})[1] for m in raw)
    if kind == "L":
        return kind, tuple(canonical(element) for element in raw)
    if kind == "M":
        return kind, canonical_item(raw)
    return kind, raw


def canonical_item(attrs):
    return frozenset((name, canonical(value)) for name, value in attrs.items())


class Touch:
    """One item a request names, and what it does to it (`factor` 2 in a transaction,
    `check` for a ConditionCheck that only reads it)."""

    def __init__(self, table, key, factor=1.0, check=False):
        self.table, self.key, self.factor, self.check = table, key, factor, check
        self.before = None


class Bill:
    """Every unit billed since the emulator started, by (resource, unit)."""

    def __init__(self):
        self.billed = defaultdict(float)
        # Requests the bill misses, as "<operation>: <error>": `usage` answers them, so a
        # reader of the bill knows it is short rather than trusting it.
        self.unbilled = []

    def usage(self):
        return {
            "Billed": [
                {"Resource": resource, "Unit": unit, "Units": units}
                for (resource, unit), units in sorted(self.billed.items())
            ],
            "Unbilled": self.unbilled,
        }

    def missed(self, operation, err):
        self.unbilled.append(f"{operation}: {err!r}")

    def take(self, resource, unit, units):
        self.billed[(resource, unit)] += units

    # DynamoDB

    def before(self, request, backend):
        """What a write will touch, as it is before moto runs it (`None` when it is not
        a billed write); the last search's items are forgotten, so a search is billed on
        its own."""
        Searched.items = None
        if request.operation not in DYNAMODB_WRITES:
            return None
        touches = list(write_touches(request.operation, request.body))
        for touch in touches:
            touch.before = stored(backend, touch.table, touch.key)
        return touches

    def served(self, request, backend, touches, status, answer):
        """Bills a DynamoDB request moto answered `status` with `answer` (its JSON)."""
        if status == 200 and request.operation in DYNAMODB_WRITES:
            for touch in touches:
                self.bill_write(backend, touch)
        elif status == 200 and request.operation in DYNAMODB_READS:
            self.bill_read(request, backend)
        elif touches and refused(answer):
            for touch in touches:
                self.take(table_resource(touch.table), "Writes", write_units(item_size(touch.before or {})))

    def bill_write(self, backend, touch):
        table = backend.get_table(touch.table)
        after = touch.before if touch.check else stored(backend, touch.table, touch.key)
        sizes = [item_size(image) for image in (touch.before, after) if image is not None]
        units = max((write_units(size) for size in sizes), default=1)
        self.take(table_resource(table.name), "Writes", units * touch.factor)
        if touch.check:
            return
        for index in indexes(table):
            units = index.write_units(touch.before, after)
            if units is not None:
                self.take(index_resource(table.name, index.name), "Writes", units)

    def bill_read(self, request, backend):
        body = request.body
        if request.operation == "GetItem":
            # The item as stored, not as a ProjectionExpression answered it.
            item = stored(backend, body["TableName"], body.get("Key", {}))
            self.take(table_resource(body["TableName"]), "Reads",
                      read_units(item_size(item or {}), body.get("ConsistentRead", False)))
        elif request.operation == "BatchGetItem":
            for table_name, asked in body.get("RequestItems", {}).items():
                for key in asked.get("Keys", []):
                    item = stored(backend, table_name, key)
                    self.take(table_resource(table_name), "Reads",
                              read_units(item_size(item or {}), asked.get("ConsistentRead", False)))
        elif request.operation == "TransactGetItems":
            for entry in body.get("TransactItems", []):
                get = entry.get("Get", {})
                item = stored(backend, get.get("TableName"), get.get("Key", {}))
                self.take(table_resource(get.get("TableName")), "Reads",
                          TRANSACTION_FACTOR * read_units(item_size(item or {}), True))
        else:
            self.bill_search(request, backend)

    def bill_search(self, request, backend):
        body = request.body
        table = backend.get_table(body["TableName"])
        index = next((i for i in indexes(table) if i.name == body.get("IndexName")), None)
        items = Searched.items
        if items is None:
            raise RuntimeError("moto answered the search without evaluating it")
        if index is not None:
            items = [index.entry(item) for item in items]
        size = sum(item_size(item) for item in items if item is not None)
        resource = index_resource(table.name, index.name) if index else table_resource(table.name)
        self.take(resource, "Reads", read_units(size, body.get("ConsistentRead", False)))

    # Kinesis

    def put_records(self, request, status):
        """Bills the records of a Kinesis put moto accepted."""
        if status != 200 or request.operation not in KINESIS_PUTS:
            return
        body = request.body
        name = body.get("StreamName") or body.get("StreamARN", "").rsplit("/", 1)[-1]
        records = body.get("Records", []) if request.operation == "PutRecords" else [body]
        self.take(f"stream/{name}", "RecordsIn", float(len(records)))


def refused(answer):
    kind = answer.get("__type", "") if isinstance(answer, dict) else ""
    return kind.endswith("ConditionalCheckFailedException") or kind.endswith("TransactionCanceledException")


def write_touches(operation, body):
    """Every item a write request names, with the factor its table is billed at."""
    if operation == "PutItem":
        yield Touch(body.get("TableName"), body.get("Item", {}))
    elif operation in ("UpdateItem", "DeleteItem"):
        yield Touch(body.get("TableName"), body.get("Key", {}))
    elif operation == "BatchWriteItem":
        for table_name, requests in body.get("RequestItems", {}).items():
            for write in requests:
                if "PutRequest" in write:
                    yield Touch(table_name, write["PutRequest"].get("Item", {}))
                elif "DeleteRequest" in write:
                    yield Touch(table_name, write["DeleteRequest"].get("Key", {}))
    elif operation == "TransactWriteItems":
        for entry in body.get("TransactItems", []):
            for kind, write in entry.items():
                key = write.get("Item", {}) if kind == "Put" else write.get("Key", {})
                yield Touch(write.get("TableName"), key, TRANSACTION_FACTOR, check=kind == "ConditionCheck")


def stored(backend, table_name, key_attrs):
    """The item at a key as moto holds it now (DynamoDB JSON), `None` if there is none."""
    try:
        table = backend.get_table(table_name)
        item = table.get_item(*moto_key(table, key_attrs))
    except (KeyError, ValueError, AttributeError, TypeError):
        return None
    return item.to_json()["Attributes"] if item is not None else None


def indexes(table):
    return [Index(index, table) for index in table.indexes + table.global_indexes]


class Searched:
    """The items the last Query or Scan evaluated, before its filter and projection (the
    emulator serves one request at a time: the one being billed)."""

    items = None


def bill_what_searches_evaluate():
    """moto's Query and Scan apply a FilterExpression and a projection last, to the items
    they evaluated: run them without either, keep those items for the bill, then apply both
    as moto does."""
    from moto.dynamodb.models.table import Table

    for name, projection in (("query", "projection_expressions"), ("scan", "projection_expression")):
        setattr(Table, name, evaluating(getattr(Table, name), projection))


def evaluating(search, projection):
    # moto's own parameters, through any patch that wraps it (functools.wraps).
    signature = inspect.signature(search)

    @functools.wraps(search)
    def search_and_keep(*args, **kwargs):
        call = signature.bind(*args, **kwargs)
        narrowing = call.arguments.get("filter_expression"), call.arguments.get(projection)
        call.arguments["filter_expression"] = None
        call.arguments[projection] = None
        results, scanned, last_key = search(*call.args, **call.kwargs)
        Searched.items = [item.to_json()["Attributes"] for item in results]
        filter_expression, projected = narrowing
        if filter_expression is not None:
            results = [item for item in results if filter_expression.expr(item)]
        if projected:
            results = [item.project(projected) for item in results]
        return results, scanned, last_key

    return search_and_keep
