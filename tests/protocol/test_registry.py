"""The API registry: what ApiVersions advertises, and that each advertised version is real."""

from __future__ import annotations

import pytest
from kio.static.constants import EntityType

from trikafka.protocol.registry import (
    IMPLEMENTED_APIS,
    ApiRegistry,
    ApiVersionSpec,
    api_name,
    kio_versions,
)


def test_ranges_are_exactly_the_implemented_apis(registry):
    ranges = list(registry.ranges())
    assert {key: (lo, hi) for key, lo, hi in ranges} == IMPLEMENTED_APIS
    assert [key for key, _, _ in ranges] == sorted(IMPLEMENTED_APIS)
    assert registry.supported == IMPLEMENTED_APIS


def test_api_versions_and_metadata_are_implemented():
    assert IMPLEMENTED_APIS[18][0] == 0  # every client starts with ApiVersions v0..
    assert IMPLEMENTED_APIS[3][0] == 0


def test_every_advertised_version_resolves_to_kio_classes(registry):
    for api_key, lo, hi in registry.ranges():
        assert lo <= hi
        assert set(range(lo, hi + 1)) <= set(kio_versions(api_key))
        for version in range(lo, hi + 1):
            spec = registry.get(api_key, version)
            assert isinstance(spec, ApiVersionSpec), (api_key, version)
            assert registry.is_supported(api_key, version)
            assert (spec.api_key, spec.version, spec.name) == (api_key, version, api_name(api_key))
            for cls, entity_type in (
                (spec.request_type, EntityType.request),
                (spec.response_type, EntityType.response),
            ):
                assert cls.__module__.startswith("kio.schema."), cls
                assert cls.__api_key__ == api_key
                assert cls.__version__ == version
                assert cls.__type__ is entity_type
            assert spec.request_header_type is spec.request_type.__header_schema__
            assert spec.response_header_type is spec.response_type.__header_schema__
            for reader in (spec.read_request, spec.read_response, spec.read_request_header):
                assert callable(reader)


def test_versions_outside_the_ranges_are_not_supported(registry):
    for api_key, lo, hi in registry.ranges():
        assert registry.get(api_key, lo - 1) is None
        assert registry.get(api_key, hi + 1) is None
        assert not registry.is_supported(api_key, hi + 1)
    assert registry.get(9999, 0) is None


def test_specs_are_resolved_once():
    """Readers and writers are resolved when the registry is built, not per lookup."""
    registry = ApiRegistry()
    assert registry.get(3, 12) is registry.get(3, 12)


def test_api_names():
    assert api_name(18) == "ApiVersions"
    assert api_name(3) == "Metadata"
    assert api_name(0) == "Produce"
    assert api_name(1) == "Fetch"
    assert api_name(9999) == "Unknown(9999)"


def test_a_registry_of_other_ranges():
    registry = ApiRegistry({18: (0, 2)})
    assert list(registry.ranges()) == [(18, 0, 2)]
    assert registry.get(18, 3) is None
    assert registry.get(3, 0) is None


def test_a_version_kio_does_not_have_is_refused_at_construction():
    with pytest.raises(ValueError, match="kio has no schema for Metadata v14"):
        ApiRegistry({3: (0, 999)})
