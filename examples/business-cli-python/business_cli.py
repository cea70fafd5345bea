#!/usr/bin/env python3
"""A business CLI behind OAR's ``project_cli`` tool (Agent Tool Protocol), in standard-library Python only.

The same contract as a CLI built on the TypeScript SDK ``@oar/tool-cli``, for a small subset of the example
business CLI (``contacts.read``, ``memory.read``, ``memory.update``) over its own sqlite3 store:

- argv: ``[--config-flag value]... MODULE METHOD [--pretty]``, or ``--describe`` alone (the manifest);
- stdin: the method's input, one JSON object, validated strictly (unknown fields are refused);
- env: the controlled credential ``OAR_TOOL_CREDENTIAL`` (an HS256 JWT: issuer ``oar``, audience ``oar-tool-cli``,
  claims ``sub``, ``ws``, ``ops``, ``iat``, ``exp``) and its key in ``BUSINESS_CLI_KEY``;
- stdout: ONE JSON object, ``{"ok": true, "module", "method", "data"}`` or
  ``{"ok": false, "status": "failure", "error": {"code", "message", ...}}``; exit 0 / 1 / 2 (usage).

Identity is the verified credential only: every query is scoped to ``sub`` in ``ws``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
import sqlite3
import sys
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Tuple

NAME = "business-cli-python"
VERSION = "0.1.0"
CREDENTIAL_ENV = "OAR_TOOL_CREDENTIAL"
KEY_ENV = "BUSINESS_CLI_KEY"
ISSUER = "oar"
AUDIENCE = "oar-tool-cli"
CLOCK_SKEW = 5  # seconds
OP_PATTERN = re.compile(r"^[a-z][a-z0-9_]*\.([a-z][a-z0-9_]*|\*)$")
FLAG_PATTERN = re.compile(r"^[a-z][a-z0-9-]*$")


class CliError(Exception):
    """A failure that becomes the CLI's failure output (``error.code`` is one of the protocol's codes)."""

    def __init__(self, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = {k: v for k, v in extra.items() if v is not None}

    def to_json(self) -> Dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.extra}


# --- input schemas: a strict object of string fields -------------------------------------------------------------


class Field:
    def __init__(self, required: bool = True, min_length: int = 0, max_length: Optional[int] = None) -> None:
        self.required = required
        self.min_length = min_length
        self.max_length = max_length

    def json_schema(self) -> Dict[str, Any]:
        schema: Dict[str, Any] = {"type": "string"}
        if self.min_length:
            schema["minLength"] = self.min_length
        if self.max_length is not None:
            schema["maxLength"] = self.max_length
        return schema

    def check(self, value: Any) -> Optional[str]:
        if not isinstance(value, str):
            return "expected string, received %s" % json_type(value)
        if len(value) < self.min_length:
            return "too short: expected at least %d characters" % self.min_length
        if self.max_length is not None and len(value) > self.max_length:
            return "too long: expected at most %d characters" % self.max_length
        return None


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


class Schema:
    """A strict object schema: the fields named, nothing else."""

    def __init__(self, fields: Dict[str, Field]) -> None:
        self.fields = fields

    def json_schema(self) -> Dict[str, Any]:
        schema: Dict[str, Any] = {
            "type": "object",
            "properties": {name: f.json_schema() for name, f in self.fields.items()},
        }
        required = [name for name, f in self.fields.items() if f.required]
        if required:
            schema["required"] = required
        schema["additionalProperties"] = False
        return schema

    def text(self) -> Dict[str, str]:
        """The compact text map of ``INVALID_ACTION_INPUT`` (``name: type``, ``name?:`` when optional)."""
        return {(name if f.required else name + "?"): "string" for name, f in self.fields.items()}

    def issues(self, value: Any) -> List[str]:
        if not isinstance(value, dict):
            return ["(input): expected object, received %s" % json_type(value)]
        found: List[str] = []
        unknown = [key for key in value if key not in self.fields]
        if unknown:
            found.append("(input): unrecognized key%s: %s" % ("s" if len(unknown) > 1 else "", ", ".join(
                '"%s"' % key for key in unknown)))
        for name, f in self.fields.items():
            if name not in value:
                if f.required:
                    found.append("%s: required" % name)
                continue
            problem = f.check(value[name])
            if problem:
                found.append("%s: %s" % (name, problem))
        return found


# --- the controlled credential: HS256 JWT verification with hmac / hashlib / base64 ------------------------------


def b64url_decode(part: str) -> bytes:
    if not re.fullmatch(r"[A-Za-z0-9_-]*", part):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def verify_credential(token: Optional[str], secret: str, now: Optional[float] = None) -> Dict[str, Any]:
    """Signature (HS256 only), issuer, audience, iat/exp with 5 s of skew, and the claim shape.

    Raises ``CliError`` CREDENTIAL_MISSING / CREDENTIAL_INVALID / CREDENTIAL_EXPIRED; no message holds the token.
    """
    if not token:
        raise CliError("CREDENTIAL_MISSING", "no credential: OAR passes one in %s" % CREDENTIAL_ENV)
    invalid = lambda why: CliError("CREDENTIAL_INVALID", "the credential is not valid (%s)" % why)  # noqa: E731
    parts = token.split(".")
    if len(parts) != 3:
        raise invalid("malformed")
    try:
        header = json.loads(b64url_decode(parts[0]))
        payload = json.loads(b64url_decode(parts[1]))
        signature = b64url_decode(parts[2])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid("malformed") from None
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise invalid("malformed")
    # The algorithm is fixed by the CLI, never chosen by the token (no "none", no algorithm confusion).
    if header.get("alg") != "HS256" or "crit" in header:
        raise invalid("algorithm")
    expected = hmac.new(secret.encode("utf-8"), (parts[0] + "." + parts[1]).encode("ascii"), hashlib.sha256).digest()
    if not hmac.compare_digest(expected, signature):
        raise invalid("signature")
    if payload.get("iss") != ISSUER:
        raise invalid("issuer")
    audience = payload.get("aud")
    if not (audience == AUDIENCE or (isinstance(audience, list) and AUDIENCE in audience)):
        raise invalid("audience")
    now = time.time() if now is None else now
    exp, iat = payload.get("exp"), payload.get("iat")
    for claim in (exp, iat):
        if not isinstance(claim, (int, float)) or isinstance(claim, bool):
            raise invalid("claims")
    if exp <= now - CLOCK_SKEW:
        raise CliError("CREDENTIAL_EXPIRED", "the credential has expired")
    if iat > now + CLOCK_SKEW:
        raise invalid("issued in the future")
    nbf = payload.get("nbf")
    if nbf is not None and (not isinstance(nbf, (int, float)) or nbf > now + CLOCK_SKEW):
        raise invalid("not yet valid")
    sub, ws, ops = payload.get("sub"), payload.get("ws"), payload.get("ops")
    if not (isinstance(sub, str) and sub and isinstance(ws, str) and ws):
        raise CliError("CREDENTIAL_INVALID", "the credential does not carry the expected claims")
    if not (isinstance(ops, list) and ops and all(isinstance(op, str) and OP_PATTERN.match(op) for op in ops)):
        raise CliError("CREDENTIAL_INVALID", "the credential does not carry the expected claims")
    return payload


def grants(claims: Dict[str, Any], module: str, method: str) -> bool:
    return any(op == "%s.%s" % (module, method) or op == "%s.*" % module for op in claims["ops"])


# --- the store -----------------------------------------------------------------------------------------------------

SEED_WS = "default"
SEED_CONTACTS = [
    ("ct_grace", "user:ada", "Grace Hopper", "grace@example.com", "+1 555 0100", "Navy"),
    ("ct_alan", "user:ada", "Alan Turing", "alan@example.org", None, "NPL"),
    ("ct_linus", "user:ada", "Linus Lee", "linus@example.net", None, None),
    ("ct_bob_ada", "user:bob", "Ada Lovelace", "ada@example.com", None, None),
]


def open_store(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=5, isolation_level=None)
    db.row_factory = sqlite3.Row
    db.executescript(
        """
        CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS contacts (
          id TEXT PRIMARY KEY, ws TEXT NOT NULL, owner TEXT NOT NULL, name TEXT NOT NULL,
          email TEXT, phone TEXT, organization TEXT
        );
        CREATE TABLE IF NOT EXISTS memory (
          ws TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at TEXT NOT NULL,
          PRIMARY KEY (ws, owner, key)
        );
        """
    )
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("SELECT 1 FROM meta WHERE key = 'seeded'").fetchone() is None:
            db.executemany(
                "INSERT INTO contacts (id, ws, owner, name, email, phone, organization) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(c[0], SEED_WS) + c[1:] for c in SEED_CONTACTS],
            )
            db.execute("INSERT INTO meta (key, value) VALUES ('seeded', ?)", (now_iso(),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return db


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- the methods ---------------------------------------------------------------------------------------------------

READ = {"readOnly": True, "destructive": False, "idempotent": True, "concurrencySafe": True, "interrupt": "cancel"}
IDEMPOTENT_WRITE = {
    "readOnly": False,
    "destructive": False,
    "idempotent": True,
    "concurrencySafe": False,
    "interrupt": "block",
}


class Context:
    def __init__(self, claims: Dict[str, Any], config: Dict[str, str]) -> None:
        self.owner: str = claims["sub"]
        self.ws: str = claims["ws"]
        self.config = config

    def store(self) -> sqlite3.Connection:
        path = self.config.get("store")
        if not path:
            raise CliError("USAGE_ERROR", "expected the config flag --store PATH before MODULE METHOD")
        return open_store(path)


def contacts_read(data: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    db = ctx.store()
    try:
        where, params = ["ws = ?", "owner = ?"], [ctx.ws, ctx.owner]
        if "contact_id" in data:
            where.append("id = ?")
            params.append(data["contact_id"])
        if "query" in data:
            like = "%" + re.sub(r"([\\%_])", r"\\\1", data["query"].strip().lower()) + "%"
            where.append(
                "(lower(name) LIKE ? ESCAPE '\\' OR lower(coalesce(email, '')) LIKE ? ESCAPE '\\'"
                " OR lower(coalesce(organization, '')) LIKE ? ESCAPE '\\')"
            )
            params += [like, like, like]
        rows = db.execute(
            "SELECT id, name, email, phone, organization FROM contacts WHERE %s ORDER BY name" % " AND ".join(where),
            params,
        ).fetchall()
    finally:
        db.close()
    items = [dict(row) for row in rows]
    result: Dict[str, Any] = {}
    for key in ("query", "contact_id"):
        if key in data:
            result[key] = data[key]
    result.update({"items": items, "count": len(items)})
    return result


def memory_read(data: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    db = ctx.store()
    try:
        if "key" in data:
            rows = db.execute(
                "SELECT key, value, updated_at FROM memory WHERE ws = ? AND owner = ? AND key = ?",
                (ctx.ws, ctx.owner, data["key"]),
            ).fetchall()
        else:
            rows = db.execute(
                "SELECT key, value, updated_at FROM memory WHERE ws = ? AND owner = ? ORDER BY key",
                (ctx.ws, ctx.owner),
            ).fetchall()
    finally:
        db.close()
    items = [dict(row) for row in rows]
    return {"items": items, "count": len(items)}


def memory_update(data: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    key, value = data["key"], data["value"]
    db = ctx.store()
    try:
        db.execute("BEGIN IMMEDIATE")
        before = db.execute(
            "SELECT value FROM memory WHERE ws = ? AND owner = ? AND key = ?", (ctx.ws, ctx.owner, key)
        ).fetchone()
        at = now_iso()
        db.execute(
            "INSERT INTO memory (ws, owner, key, value, updated_at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (ws, owner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            (ctx.ws, ctx.owner, key, value, at),
        )
        db.execute("COMMIT")
    finally:
        db.close()
    previous = before["value"] if before is not None else None
    return {
        "key": key,
        "value": value,
        "previous": previous,
        "created": before is None,
        "changed": previous != value,
        "updated_at": at,
    }


Handler = Callable[[Dict[str, Any], Context], Any]

# module -> method -> definition: the whitelist, the only dispatcher.
MODULES: Dict[str, Dict[str, Dict[str, Any]]] = {
    "contacts": {
        "read": {
            "description": "Your contacts: all, those whose name, email or organization contains query, or one by"
            " contact_id",
            "input": Schema(
                {
                    "query": Field(required=False, min_length=1, max_length=100),
                    "contact_id": Field(required=False, min_length=1, max_length=100),
                }
            ),
            "facts": READ,
            "handler": contacts_read,
        },
    },
    "memory": {
        "read": {
            "description": "Your memory notes: all, or the one named key",
            "input": Schema({"key": Field(required=False, min_length=1, max_length=100)}),
            "facts": READ,
            "handler": memory_read,
        },
        "update": {
            "description": "Set one of your memory notes (key -> value); setting the same value again is a no-op",
            "input": Schema({"key": Field(min_length=1, max_length=100), "value": Field(max_length=4000)}),
            "facts": IDEMPOTENT_WRITE,
            "handler": memory_update,
        },
    },
}


def manifest() -> Dict[str, Any]:
    """The ``--describe`` manifest, in the shape of the SDK's ManifestSchema."""
    return {
        "name": NAME,
        "version": VERSION,
        "description": "Example business CLI in standard-library Python: contacts and memory notes (its own SQLite"
        " store)",
        "credential": {"algorithm": "HS256"},
        "methods": [
            {
                "module": module,
                "method": method,
                "description": definition["description"],
                "inputSchema": definition["input"].json_schema(),
                "facts": definition["facts"],
            }
            for module, methods in MODULES.items()
            for method, definition in methods.items()
        ],
    }


# --- the boundary --------------------------------------------------------------------------------------------------


def parse_args(argv: List[str]) -> Tuple[Dict[str, str], str, str, bool]:
    config: Dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        flag = argv[i][2:]
        if not FLAG_PATTERN.match(flag) or i + 1 >= len(argv):
            raise CliError("USAGE_ERROR", 'expected [--config-flag value]... MODULE METHOD [--pretty]; got "%s"' % argv[i])
        config[flag] = argv[i + 1]
        i += 2
    rest = argv[i:]
    if len(rest) < 2:
        raise CliError("USAGE_ERROR", "expected MODULE METHOD after the config flags")
    module, method, fmt = rest[0], rest[1], rest[2:]
    for flag in fmt:
        if flag != "--pretty":
            raise CliError("USAGE_ERROR", 'unknown format flag "%s" (only --pretty)' % flag)
    return config, module, method, "--pretty" in fmt


def run(argv: List[str], stdin: str, env: Dict[str, str]) -> Tuple[int, Dict[str, Any], bool]:
    """One call: (exit code, the output object, pretty)."""
    if argv == ["--describe"]:
        return 0, manifest(), False
    pretty = False
    where: Dict[str, Any] = {}
    try:
        config, module, method, pretty = parse_args(argv)
        where = {"module": module, "method": method}
        methods = MODULES.get(module) if module in MODULES else None
        definition = methods.get(method) if methods is not None and method in methods else None
        if definition is None:
            raise CliError("ACTION_NOT_ALLOWED", "%s.%s is not a method of %s" % (module, method, NAME), **where)
        secret = env.get(KEY_ENV)
        if not secret:
            raise CliError("CREDENTIAL_INVALID", "the CLI's verification key is not configured (%s)" % KEY_ENV)
        claims = verify_credential(env.get(CREDENTIAL_ENV), secret)
        if not grants(claims, module, method):
            raise CliError("ACTION_NOT_ALLOWED", "the credential does not allow %s.%s" % (module, method), **where)
        try:
            raw = {} if stdin.strip() == "" else json.loads(stdin)
        except ValueError as error:
            raise CliError("INPUT_NOT_JSON", "stdin is not JSON: %s" % error, **where) from None
        schema: Schema = definition["input"]
        issues = schema.issues(raw)
        if issues:
            raise CliError(
                "INVALID_ACTION_INPUT",
                "%s.%s input does not match: %s" % (module, method, "; ".join(issues)),
                input_schema=schema.text(),
                **where,
            )
        data = definition["handler"](raw, Context(claims, config))
        return 0, {"ok": True, "module": module, "method": method, "data": data}, pretty
    except CliError as error:
        return (2 if error.code == "USAGE_ERROR" else 1), {"ok": False, "status": "failure", "error": error.to_json()}, pretty
    except Exception as error:  # a handler failure: its message, never a traceback on stdout
        failure = {"code": "HANDLER_FAILED", "message": str(error) or type(error).__name__, **where}
        return 1, {"ok": False, "status": "failure", "error": failure}, pretty


def main() -> None:
    raw = b"" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.buffer.read()
    stdin = raw.decode("utf-8", errors="replace")  # invalid UTF-8 then fails as INPUT_NOT_JSON or input text
    code, output, pretty = run(sys.argv[1:], stdin, dict(os.environ))
    sys.stdout.reconfigure(encoding="utf-8")  # type: ignore[attr-defined]
    sys.stdout.write(json.dumps(output, ensure_ascii=False, indent=2 if pretty else None) + "\n")
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":
    main()
