"""ECHO_TENANT: one per namespace and name, always a tenant the services accept."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from echo.store import tenancy
from echo_operator.tenant import tenant_id

DNS_LABEL = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", fullmatch=True)
DNS_NAME = st.from_regex(r"[a-z0-9]([a-z0-9.-]{0,120}[a-z0-9])?", fullmatch=True)


def test_namespace_and_name() -> None:
    assert tenant_id("tenants", "acme") == "tenants-acme"
    assert tenant_id("team-a", "echo") != tenant_id("team-b", "echo")
    assert tenant_id("1st", "x.y") == "t-1st-x-y"


def test_long_names_are_cut_and_stay_distinct() -> None:
    first = tenant_id("a-very-long-namespace-name-for-tests", "deployment-number-one")
    second = tenant_id("a-very-long-namespace-name-for-tests", "deployment-number-two")
    assert len(first) <= 40
    assert len(second) <= 40
    assert first != second


@given(DNS_LABEL, DNS_NAME)
def test_every_kubernetes_name_gives_a_valid_tenant(namespace: str, name: str) -> None:
    assert tenancy.validate_tenant(tenant_id(namespace, name))
