"""The Spark job's own flags, shared by ``subroute spark run`` and the job's ``main`` (spark-submit)."""

from __future__ import annotations

import argparse


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", required=True, metavar="DIR", help="Parquet root (any Hadoop path)")
    parser.add_argument("--checkpoint", metavar="DIR", help="Spark checkpoint (default OUTPUT/_checkpoint)")
    parser.add_argument("--topic", action="append", metavar="TOPIC", help="a topic to read, repeatable")
    parser.add_argument("--pattern", metavar="REGEX", help="topics to read (whole-name match)")
    parser.add_argument(
        "--app",
        action="append",
        metavar="APP",
        help="read every group topic of APP, repeatable (default: all apps)",
    )
    parser.add_argument(
        "--starting-offsets",
        default="earliest",
        metavar="SPEC",
        help="earliest (default), latest or Spark's JSON",
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, metavar="N")
    parser.add_argument(
        "--trigger",
        default="available-now",
        metavar="WHEN",
        help="available-now (default: land what is there, then stop) or an interval such as '30 seconds'",
    )
    parser.add_argument(
        "--avro-schema",
        action="append",
        metavar="APP=SCHEMA",
        help="decode APP's payloads: an .avsc path or a name from schemas/ (e.g. orders=order), repeatable",
    )
    parser.add_argument(
        "--schema-registry-url",
        metavar="URL",
        help="Confluent Schema Registry for --avro-schema apps whose values are in Confluent's wire format "
        "(magic byte 0, schema id): writer schemas are fetched from it by id (env SUBROUTE_SCHEMA_REGISTRY_URL)",
    )
    parser.add_argument(
        "--schema-registry-config",
        action="append",
        metavar="KEY=VALUE",
        help="a SchemaRegistryClient property, repeatable (basic.auth.user.info, ssl.ca.location, ...)",
    )
    parser.add_argument(
        "--group-id",
        metavar="ID",
        help="commit every offset to this consumer group (default: each group topic to its group's own)",
    )
    parser.add_argument("--no-commit", action="store_true", help="do not commit offsets to Kafka")
    parser.add_argument("--source", choices=("auto", "kafka", "python"), default="auto", help="Kafka source")
