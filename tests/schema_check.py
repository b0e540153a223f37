"""Every record a test writes or reads back is checked against the published JSON Schema."""

import json

import jsonschema

from spillage.audit.session_audit import SCHEMA_PATH as AUDIT_SCHEMA_PATH
from spillage.proxy.capturelog import SCHEMA_PATH

RECORD_VALIDATOR = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))
AUDIT_VALIDATOR = jsonschema.Draft202012Validator(json.loads(AUDIT_SCHEMA_PATH.read_text()))


def assert_valid_record(record: dict) -> None:
    """Fail with the schema's complaint if `record` does not match the capture record schema."""
    RECORD_VALIDATOR.validate(record)


def assert_valid_audit(report: dict) -> None:
    """Fail with the schema's complaint if `report` does not match audit/audit.schema.json."""
    AUDIT_VALIDATOR.validate(report)
