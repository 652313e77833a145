"""ECHO_TENANT: one per namespace and name, never shared by two, always a tenant the services accept.

Two EchoDeployments with one tenant id would share a PostgreSQL schema and Qdrant collections (a
cross-tenant leak, DESIGN §7), so the id must tell every (namespace, name) pair apart, including
pairs that read the same once joined with '-' (`team/a-x` and `team-a/x`).
"""

from __future__ import annotations

import hashlib

from hypothesis import assume, given
from hypothesis import strategies as st

from echo.config import tenancy
from echo.ports import vectors
from echo_operator.render.tenant import TENANT_ID_MAX, tenant_id

# What Kubernetes accepts: a namespace is a DNS-1123 label; an object name a DNS-1123 subdomain
# (EchoDeployment names are narrower, DNS-1035 labels of at most 40 characters: a subset).
DNS_LABEL = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
DNS_SUBDOMAIN = (
    st.lists(DNS_LABEL, min_size=1, max_size=5).map(".".join).filter(lambda name: len(name) <= 253)
)
PAIRS = st.tuples(DNS_LABEL, DNS_SUBDOMAIN)


def digest(namespace: str, name: str) -> str:
    return hashlib.sha256(f"{namespace}/{name}".encode()).hexdigest()[:12]


def test_a_readable_prefix_and_the_digest_of_namespace_slash_name() -> None:
    assert tenant_id("tenants", "acme") == f"tenants-acme-{digest('tenants', 'acme')}"
    assert tenant_id("1st", "x.y") == f"t-1st-x-y-{digest('1st', 'x.y')}"


def test_names_that_join_to_the_same_text_get_different_ids() -> None:
    """The issue-7 collision: both once read `team-a-x`."""
    assert tenant_id("team", "a-x") != tenant_id("team-a", "x")
    assert tenant_id("team", "a.x") != tenant_id("team", "a-x")


def test_long_names_are_cut_and_stay_distinct() -> None:
    first = tenant_id("a-very-long-namespace-name-for-tests", "deployment-number-one")
    second = tenant_id("a-very-long-namespace-name-for-tests", "deployment-number-two")
    assert len(first) <= TENANT_ID_MAX
    assert len(second) <= TENANT_ID_MAX
    assert first.startswith("a-very-long-namespace-name-")
    assert first != second


@given(PAIRS)
def test_every_kubernetes_name_gives_a_valid_tenant(pair: tuple[str, str]) -> None:
    namespace, name = pair
    tenant = tenant_id(namespace, name)
    assert tenancy.validate_tenant(tenant) == tenant
    assert len(tenant) <= TENANT_ID_MAX
    assert tenant.endswith(f"-{digest(namespace, name)}")
    vectors.collection_name(tenant, vectors.Kind.MEMORY)  # Qdrant's rule too


@given(PAIRS, PAIRS)
def test_distinct_pairs_get_distinct_ids(first: tuple[str, str], second: tuple[str, str]) -> None:
    assume(first != second)
    assert tenant_id(*first) != tenant_id(*second)
    assert tenancy.schema_for(tenant_id(*first)) != tenancy.schema_for(tenant_id(*second))


@given(st.lists(DNS_LABEL, min_size=2, max_size=6))
def test_every_split_of_one_dashed_text_gets_its_own_id(parts: list[str]) -> None:
    """`a-b-c` as (a, b-c) and (a-b, c): the pairs an unsafe join would confuse."""
    splits = {("-".join(parts[:cut]), "-".join(parts[cut:])) for cut in range(1, len(parts))}
    splits = {(ns, name) for ns, name in splits if len(ns) <= 63 and len(name) <= 253}
    assert len({tenant_id(ns, name) for ns, name in splits}) == len(splits)


@given(DNS_LABEL, DNS_SUBDOMAIN.filter(lambda name: "." in name))
def test_dots_and_dashes_stay_apart(namespace: str, name: str) -> None:
    assert tenant_id(namespace, name) != tenant_id(namespace, name.replace(".", "-"))
