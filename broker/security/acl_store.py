"""The ACLs of a broker, durable in the data dir (`acls.log`) as Kafka's AccessControlEntryRecord
and RemoveAccessControlEntryRecord: every change appends its records (fsynced) before the
authorizer sees it, and start-up replays them through the same `replay`.

CreateAcls and DeleteAcls follow AclApis and AclControlManager: each creation is validated on its
own (INVALID_REQUEST with Kafka's message), an ACL that exists already or twice in one request is
created once and reported a success, a filter deletes every ACL it matches (at most 10,000 per
request: INVALID_REQUEST beyond).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from broker.security.acls import Acl, AclFilter, validate_new
from broker.security.authorizer import StandardAuthorizer
from broker.security.records import RecordLog

FILE_NAME = "acls.log"
MAX_DELETE = 10_000


class AclStoreError(Exception):
    """The whole request fails with INVALID_REQUEST and this message."""


class AclStore:
    def __init__(self, data_dir: Path, authorizer: StandardAuthorizer) -> None:
        self.log = RecordLog(Path(data_dir) / FILE_NAME)
        self.authorizer = authorizer
        self.by_id: dict[str, Acl] = {}
        self.existing: dict[Acl, str] = {}

    def load(self) -> None:
        self.log.load(self.replay)
        self.log.compact([_add_record(i, a) for i, a in self.by_id.items()])

    def replay(self, record: dict[str, Any]) -> None:
        if record["type"] == "AccessControlEntry":
            acl = Acl(
                record["resource_type"],
                record["resource_name"],
                record["pattern_type"],
                record["principal"],
                record["host"],
                record["operation"],
                record["permission_type"],
            )
            if acl in self.existing:
                return
            self.by_id[record["id"]] = acl
            self.existing[acl] = record["id"]
            self.authorizer.add(acl)
        elif record["type"] == "RemoveAccessControlEntry":
            acl = self.by_id.pop(record["id"], None)
            if acl is not None:
                del self.existing[acl]
                self.authorizer.remove(acl)

    def create(self, acls: list[Acl]) -> list[str | None]:
        """Per ACL: None (created, or already there) or the INVALID_REQUEST message."""
        results: list[str | None] = []
        records = []
        pending: set[Acl] = set()
        for acl in acls:
            error = validate_new(acl)
            if error is None and acl not in self.existing and acl not in pending:
                pending.add(acl)
                records.append(_add_record(str(uuid.uuid4()), acl))
            results.append(error)
        self.log.append(records)
        for record in records:
            self.replay(record)
        return results

    def delete(self, filters: list[AclFilter]) -> list[tuple[str | None, list[Acl]]]:
        """Per filter: (error message or None, the ACLs it deleted)."""
        results: list[tuple[str | None, list[Acl]]] = []
        doomed: dict[str, Acl] = {}
        for f in filters:
            error = f.unknown()
            if error is not None:
                results.append((error, []))
                continue
            matched = [(i, a) for i, a in self.by_id.items() if f.matches(a)]
            if len(doomed) + len([i for i, _ in matched if i not in doomed]) > MAX_DELETE:
                raise AclStoreError(f"Cannot remove more than {MAX_DELETE} acls in a single delete operation.")
            doomed.update(matched)
            results.append((None, [a for _, a in matched]))
        records = [{"type": "RemoveAccessControlEntry", "id": i} for i in doomed]
        self.log.append(records)
        for record in records:
            self.replay(record)
        return results

    def describe(self, f: AclFilter) -> list[Acl]:
        return [a for a in self.by_id.values() if f.matches(a)]


def _add_record(acl_id: str, acl: Acl) -> dict[str, Any]:
    return {
        "type": "AccessControlEntry",
        "id": acl_id,
        "resource_type": acl.resource_type,
        "resource_name": acl.name,
        "pattern_type": acl.pattern_type,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation,
        "permission_type": acl.permission,
    }
