#!/usr/bin/env python3
"""Runs recount.sql in DuckDB over a local folder of an export's data files; prints CSV.

    .venv/bin/python infra/athena/recount_duckdb.py <folder of *.json.gz>

The same query Athena runs at platform scale, with only its source substituted: here
DuckDB's read_json over the files, with the columns export_table.sql declares. Output:
a header `item_id,likes,dislikes,unknown_states`, then one line per item, in item order.
"""

import csv
import pathlib
import string
import sys

import duckdb

HERE = pathlib.Path(__file__).resolve().parent
# The columns of export_table.sql, in DuckDB's type syntax.
COLUMNS = "{'Item': 'STRUCT(user_id STRUCT(S VARCHAR), item_id STRUCT(S VARCHAR), state STRUCT(S VARCHAR))'}"


def source(folder):
    pattern = str(pathlib.Path(folder).resolve() / "*.json.gz").replace("'", "''")
    return (
        f"read_json('{pattern}', format = 'newline_delimited', compression = 'gzip', "
        f"columns = {COLUMNS})"
    )


def main(argv):
    if len(argv) != 2 or not pathlib.Path(argv[1]).is_dir():
        print(__doc__.strip(), file=sys.stderr)
        return 2
    query = string.Template((HERE / "recount.sql").read_text()).substitute(export=source(argv[1]))
    result = duckdb.connect().sql(query)
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(result.columns)
    out.writerows(result.fetchall())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
