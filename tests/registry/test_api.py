"""The REST API's answers and refusals, Confluent's shapes, over an in-memory ``_schemas``."""

from __future__ import annotations

import json

from tests.registry.conftest import call_app

USER = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {**USER, "fields": [*USER["fields"], {"name": "age", "type": "int", "default": 0}]}


async def test_register_is_idempotent_and_ids_are_global(app):
    status, first = await call_app(app, "POST", "/subjects/a-value/versions", {"schema": json.dumps(USER)})
    assert status == 200 and first["id"] == 1 and first["version"] == 1
    # The same schema again: the same id and version, nothing new.
    assert (await call_app(app, "POST", "/subjects/a-value/versions", {"schema": json.dumps(USER, indent=2)}))[1][
        "id"
    ] == 1
    assert (await call_app(app, "GET", "/subjects/a-value/versions"))[1] == [1]
    # The same schema under another subject shares the id; a new one gets the next.
    assert (await call_app(app, "POST", "/subjects/b-value/versions", {"schema": json.dumps(USER)}))[1]["id"] == 1
    _, second = await call_app(app, "POST", "/subjects/a-value/versions", {"schema": json.dumps(USER_V2)})
    assert (second["id"], second["version"]) == (2, 2)
    assert (await call_app(app, "GET", "/subjects"))[1] == ["a-value", "b-value"]
    assert (await call_app(app, "GET", "/schemas/ids/1/versions"))[1] == [
        {"subject": "a-value", "version": 1}, {"subject": "b-value", "version": 1},
    ]
    _, by_id = await call_app(app, "GET", "/schemas/ids/2")
    assert json.loads(by_id["schema"]) == USER_V2
    _, by_guid = await call_app(app, "GET", f"/schemas/guids/{by_id['guid']}")
    assert by_guid["schema"] == by_id["schema"]
    _, latest = await call_app(app, "GET", "/subjects/a-value/versions/latest")
    assert (latest["subject"], latest["version"], latest["id"]) == ("a-value", 2, 2)
    status, raw = await call_app(app, "GET", "/subjects/a-value/versions/1/schema")
    assert status == 200 and raw == USER


async def test_lookup(app):
    await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(USER)})
    status, found = await call_app(app, "POST", "/subjects/s", {"schema": json.dumps(USER)})
    assert status == 200 and (found["version"], found["id"]) == (1, 1)
    assert await call_app(app, "POST", "/subjects/s", {"schema": json.dumps(USER_V2)}) == (
        404, {"error_code": 40403, "message": "Schema not found"},
    )
    assert (await call_app(app, "POST", "/subjects/nope", {"schema": json.dumps(USER)}))[1]["error_code"] == 40401


async def test_errors_have_confluents_codes(app):
    async def code(method, path, body=None, raw=None):
        status, answer = await call_app(app, method, path, body, raw=raw)
        assert set(answer) == {"error_code", "message"}, answer
        return status, answer["error_code"]

    assert await code("GET", "/subjects/none/versions") == (404, 40401)
    await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(USER)})
    assert await code("GET", "/subjects/s/versions/7") == (404, 40402)
    assert await code("GET", "/subjects/s/versions/zero") == (422, 42202)
    assert await code("GET", "/subjects/s/versions/0") == (422, 42202)
    assert await code("GET", "/schemas/ids/99") == (404, 40403)
    assert await code("GET", "/schemas/ids/x") == (404, 40403)
    assert await code("POST", "/subjects/s/versions", {"schema": "{not json"}) == (422, 42201)
    assert await code("POST", "/subjects/s/versions", {"schema": '{"type": "record"}'}) == (422, 42201)
    assert await code("POST", "/subjects/s/versions", {"schema": "x", "schemaType": "XML"}) == (422, 42201)
    assert await code("POST", "/subjects/s/versions", raw=b"{oops") == (422, 422)
    assert await code("POST", "/subjects/s/versions", [1, 2]) == (422, 422)
    assert await code("PUT", "/config", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert await code("PUT", "/mode", {"mode": "WRITEONLY"}) == (422, 42204)
    assert await code("GET", "/config/s") == (404, 40408)
    assert await code("GET", "/mode/s") == (404, 40409)
    assert await code("GET", "/nothing/here") == (404, 404)
    assert await code("PATCH", "/subjects") == (405, 405)
    # The associations API is not built: 404 is what makes confluent-kafka's serializers
    # fall back to the topic name strategy.
    assert await code("GET", "/associations/resources/-/orders") == (404, 404)
    assert await code("GET", "/subjects/s/metadata?key=owner&value=x") == (404, 40403)


async def test_incompatible_schema_is_409_with_reasons(app):
    await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(USER)})
    breaking = {**USER, "fields": [*USER["fields"], {"name": "age", "type": "int"}]}
    status, answer = await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(breaking)})
    assert status == 409 and answer["error_code"] == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in answer["message"] and "'age'" in answer["message"]
    status, verdict = await call_app(
        app, "POST", "/compatibility/subjects/s/versions/latest?verbose=true", {"schema": json.dumps(breaking)}
    )
    assert status == 200 and verdict["is_compatible"] is False and verdict["messages"]
    assert (await call_app(app, "POST", "/compatibility/subjects/s/versions/1", {"schema": json.dumps(USER_V2)}))[
        1
    ] == {"is_compatible": True}
    # NONE for the subject: accepted; the global level is unchanged.
    assert (await call_app(app, "PUT", "/config/s", {"compatibility": "none"}))[1] == {"compatibility": "NONE"}
    assert (await call_app(app, "GET", "/config/s"))[1]["compatibilityLevel"] == "NONE"
    assert (await call_app(app, "GET", "/config"))[1] == {"compatibilityLevel": "BACKWARD"}
    assert (await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(breaking)}))[0] == 200
    assert (await call_app(app, "DELETE", "/config/s"))[1] == {"compatibilityLevel": "NONE"}
    assert (await call_app(app, "GET", "/config/s?defaultToGlobal=true"))[1] == {"compatibilityLevel": "BACKWARD"}


async def test_soft_then_permanent_delete(app):
    for schema in (USER, USER_V2):
        await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(schema)})
    assert (await call_app(app, "DELETE", "/subjects/s/versions/1?permanent=true"))[1]["error_code"] == 40407
    assert await call_app(app, "DELETE", "/subjects/s/versions/1") == (200, 1)
    assert (await call_app(app, "DELETE", "/subjects/s/versions/1"))[1]["error_code"] == 40406
    assert (await call_app(app, "GET", "/subjects/s/versions/1"))[1]["error_code"] == 40402
    assert (await call_app(app, "GET", "/subjects/s/versions/1?deleted=true"))[1]["version"] == 1
    assert (await call_app(app, "GET", "/subjects/s/versions"))[1] == [2]
    assert (await call_app(app, "GET", "/subjects/s/versions?deleted=true"))[1] == [1, 2]
    assert await call_app(app, "DELETE", "/subjects/s/versions/1?permanent=true") == (200, 1)
    assert (await call_app(app, "GET", "/subjects/s/versions?deleted=true"))[1] == [2]
    # The subject: soft, then permanent; the schema id stays readable until then.
    assert (await call_app(app, "DELETE", "/subjects/s?permanent=true"))[1]["error_code"] == 40405
    assert await call_app(app, "DELETE", "/subjects/s") == (200, [2])
    assert (await call_app(app, "DELETE", "/subjects/s"))[1]["error_code"] == 40404
    assert (await call_app(app, "GET", "/subjects"))[1] == []
    assert (await call_app(app, "GET", "/subjects?deleted=true"))[1] == ["s"]
    assert (await call_app(app, "GET", "/schemas/ids/2"))[0] == 200
    assert await call_app(app, "DELETE", "/subjects/s?permanent=true") == (200, [2])
    assert (await call_app(app, "GET", "/subjects?deleted=true"))[1] == []
    assert (await call_app(app, "GET", "/schemas/ids/2"))[1]["error_code"] == 40403
    # A new registration after all that: ids keep increasing, versions start again.
    _, again = await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps({**USER, "doc": "x"})})
    assert (again["id"], again["version"]) == (3, 1)


async def test_references_and_referenced_by(app):
    address = {
        "type": "record",
        "name": "Address",
        "namespace": "com.acme",
        "fields": [{"name": "city", "type": "string"}],
    }
    _, ref = await call_app(app, "POST", "/subjects/address/versions", {"schema": json.dumps(address)})
    person = {
        "type": "record",
        "name": "Person",
        "namespace": "com.acme",
        "fields": [{"name": "home", "type": "com.acme.Address"}],
    }
    refs = [{"name": "com.acme.Address", "subject": "address", "version": 1}]
    status, registered = await call_app(
        app, "POST", "/subjects/person/versions", {"schema": json.dumps(person), "references": refs}
    )
    assert status == 200
    assert (await call_app(app, "GET", "/subjects/address/versions/1/referencedby"))[1] == [registered["id"]]
    assert (await call_app(app, "GET", f"/schemas/ids/{registered['id']}"))[1]["references"] == refs
    # Without the reference the type is unknown; a reference to nothing is refused too.
    assert (await call_app(app, "POST", "/subjects/p2/versions", {"schema": json.dumps(person)}))[1][
        "error_code"
    ] == 42201
    missing = [{"name": "x", "subject": "address", "version": 9}]
    assert (
        await call_app(app, "POST", "/subjects/p2/versions", {"schema": json.dumps(person), "references": missing})
    )[1]["error_code"] == 42201
    # A referenced version cannot be deleted.
    assert (await call_app(app, "DELETE", "/subjects/address/versions/1"))[1]["error_code"] == 42206


async def test_modes(app):
    assert (await call_app(app, "GET", "/mode"))[1] == {"mode": "READWRITE"}
    assert (await call_app(app, "PUT", "/mode/s", {"mode": "READONLY"}))[1] == {"mode": "READONLY"}
    status, answer = await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(USER)})
    assert (status, answer["error_code"]) == (422, 42205)
    assert (await call_app(app, "DELETE", "/mode/s"))[1] == {"mode": "READONLY"}
    await call_app(app, "POST", "/subjects/s/versions", {"schema": json.dumps(USER)})
    # IMPORT keeps the ids and versions it is given; it needs force once subjects exist.
    assert (await call_app(app, "PUT", "/mode", {"mode": "IMPORT"}))[1]["error_code"] == 42205
    assert (await call_app(app, "PUT", "/mode?force=true", {"mode": "IMPORT"}))[1] == {"mode": "IMPORT"}
    body = {"schema": json.dumps(USER_V2), "id": 100, "version": 5}
    _, imported = await call_app(app, "POST", "/subjects/t/versions", body)
    assert (imported["id"], imported["version"]) == (100, 5)
    await call_app(app, "PUT", "/mode", {"mode": "READWRITE"})
    _, after = await call_app(app, "POST", "/subjects/u/versions", {"schema": json.dumps({**USER, "doc": "new"})})
    assert after["id"] == 101


async def test_metadata_and_rule_set_are_kept_not_run(app):
    metadata = {"properties": {"owner": "team-a"}}
    rule_set = {"domainRules": [{"name": "r", "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": "false"}]}
    body = {"schema": json.dumps(USER), "metadata": metadata, "ruleSet": rule_set}
    assert (await call_app(app, "POST", "/subjects/s/versions", body))[0] == 200
    _, found = await call_app(app, "GET", "/subjects/s/metadata?key=owner&value=team-a")
    assert (found["metadata"], found["ruleSet"]) == (metadata, rule_set)


async def test_import_refuses_a_taken_version_and_config_keeps_known_keys(app):
    await call_app(app, "PUT", "/mode", {"mode": "IMPORT"})
    await call_app(app, "POST", "/subjects/t/versions", {"schema": json.dumps(USER), "id": 7, "version": 1})
    status, answer = await call_app(
        app, "POST", "/subjects/t/versions", {"schema": json.dumps(USER_V2), "id": 8, "version": 1}
    )
    assert (status, answer["error_code"]) == (422, 42205)
    _, kept = await call_app(app, "PUT", "/config/t", {"compatibility": "FULL", "normalize": True, "junk": 1})
    assert kept == {"compatibility": "FULL", "normalize": True}
