"""The store's id and fingerprint indexes (schema_registry/store.py) answer as a walk
over every version would, through registrations, soft deletes, rewrites and tombstones."""

from __future__ import annotations

from schema_registry.store import Store


def key(subject: str, version: int) -> dict:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def value(subject: str, version: int, schema_id: int, schema: str, deleted: bool = False) -> dict:
    return {"subject": subject, "version": version, "id": schema_id, "schema": schema, "deleted": deleted}


def walk_by_id(store: Store, schema_id: int) -> list:
    return sorted((v.subject, v.version) for vs in store.subjects.values() for v in vs.values()
                  if v.schema_id == schema_id)


def test_indexes_follow_every_kind_of_record():
    store = Store()
    store.apply(key("a", 1), value("a", 1, 1, '"int"'))
    store.apply(key("b", 1), value("b", 1, 1, '"int"'))
    store.apply(key("a", 2), value("a", 2, 2, '"long"'))
    fingerprint = store.subjects["a"][1].fingerprint()
    assert store.id_for(fingerprint) == 1 and store.id_for(("AVRO", '"string"', ())) is None
    store.apply({"keytype": "DELETE_SUBJECT", "subject": "a"}, {"subject": "a", "version": 2})
    assert all(v.deleted for v in store.by_id(2)) and walk_by_id(store, 2) == [("a", 2)]
    store.apply(key("a", 2), value("a", 2, 3, '"long"'))  # a version rewritten with another id
    assert store.by_id(2) == [] and [v.version for v in store.by_id(3)] == [2]
    store.apply(key("a", 1), None)  # permanent deletes: tombstones
    store.apply(key("b", 1), None)
    assert store.by_id(1) == [] and store.id_for(fingerprint) is None
    store.apply(key("c", 1), value("c", 1, 4, '"int"'))  # the same schema again, a new id
    assert store.id_for(fingerprint) == 4
    for schema_id in range(1, 5):
        assert sorted((v.subject, v.version) for v in store.by_id(schema_id)) == walk_by_id(store, schema_id)
