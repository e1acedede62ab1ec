"""Loading a PROTOBUF schema's files into a descriptor pool, imports first: shared by the
Schema Registry (which checks a schema this way) and the REST Proxy (which builds message
classes this way), so what the registry accepts the proxy can load.

Why a neutral module: an import contract keeps the REST Proxy out of schema_registry,
and `wire/` stays free of google.protobuf. The well-known google/protobuf files come from the
protobuf package itself: a schema imports them without references, as Confluent's registry
knows them; some import others (type.proto needs any.proto and source_context.proto).
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool

FDP = descriptor_pb2.FileDescriptorProto


class ImportError_(ValueError):
    """An import that cannot be resolved (unknown file, or a cycle); the message names it."""


def _well_known() -> dict[str, FDP]:
    from google.protobuf import (any_pb2, api_pb2, duration_pb2, empty_pb2, field_mask_pb2, source_context_pb2,
                                 struct_pb2, timestamp_pb2, type_pb2, wrappers_pb2)

    files = {}
    for module in (any_pb2, source_context_pb2, type_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2,
                   field_mask_pb2, struct_pb2, timestamp_pb2, wrappers_pb2):
        proto = FDP.FromString(module.DESCRIPTOR.serialized_pb)
        files[proto.name] = proto
    return files


WELL_KNOWN = _well_known()


def add_imports(pool: descriptor_pool.DescriptorPool, proto: FDP, files: dict[str, FDP]) -> set[str]:
    """Add every file `proto` imports, transitively and each before its importers, to `pool`;
    `files` are the schema's references by name (the well-known files are added to them).
    Returns the names added. ImportError_ for a file neither known nor referenced, or a cycle."""
    known = {**WELL_KNOWN, **files}
    added: set[str] = set()

    def add(name: str, trail: tuple[str, ...]) -> None:
        if name in added:
            return
        if name in trail:
            raise ImportError_(f"import cycle through {name}")
        dep = known.get(name)
        if dep is None:
            raise ImportError_(f"import {name!r} is neither a well-known google/protobuf file nor a reference")
        for sub in dep.dependency:
            add(sub, trail + (name,))
        pool.Add(dep)
        added.add(name)

    for name in proto.dependency:
        add(name, (proto.name,))
    return added
