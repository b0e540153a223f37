"""Every record a test writes or reads back is checked against the published JSON Schema."""

import json

import jsonschema

from spillage.proxy.capturelog import SCHEMA_PATH

RECORD_VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def assert_valid_record(record: dict) -> None:
    """Fail with the schema's complaint if `record` does not match the capture record schema."""
    RECORD_VALIDATOR.validate(record)
