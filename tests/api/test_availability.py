"""GET /api/inventory/availability/: physical units per DeviceClass, its filters, its schema,
who may read it and what it costs in queries."""

from __future__ import annotations

import yaml

from tests import factories as f
from tests.claims.devices.kept import fresh  # noqa: F401 (autouse: nothing kept across tests)
from tests.claims.devices.test_availability import GPU, attrs, build_cluster, mig_gpu

URL = "/api/inventory/availability/"


def entries(response) -> dict[str, dict]:
    assert response.status_code == 200, response.content
    return {entry["deviceClass"]: entry for entry in response.json()["results"]}


def test_every_class_has_units_devices_and_partitions(api) -> None:
    """One entry per DeviceClass, with the contract's keys and numbers."""
    build_cluster()
    body = api.get(URL).json()
    assert "counter set" in body["definition"]
    found = {entry["deviceClass"]: entry for entry in body["results"]}
    assert sorted(found) == ["gpu", "gpu-h100", "mig", "mig-1g", "nic"]
    mig = found["mig-1g"]
    assert set(mig) == {"deviceClass", "physical", "devices", "partitions", "celErrors", "error"}
    assert mig["physical"] == {"total": 2, "free": 1}
    assert mig["devices"] == {"total": 6, "free": 5}
    assert mig["partitions"] == [
        {"profile": "1g.10gb", "total": 6, "free": 5, "parents": 2, "parentsWithFree": 2}
    ]
    assert found["gpu-h100"]["physical"] == {"total": 3, "free": 2}


def test_filters_narrow_the_units(api) -> None:
    """node, pool (driver/pool), driver and class narrow the answer."""
    build_cluster()
    assert entries(api.get(URL, {"node": "node-b"}))["gpu"]["physical"] == {"total": 2, "free": 2}
    assert entries(api.get(URL, {"pool": f"{GPU}/node-a"}))["gpu"]["physical"] == {
        "total": 3,
        "free": 2,
    }
    assert entries(api.get(URL, {"driver": "nic.example.com"}))["gpu"]["physical"]["total"] == 0
    only = entries(api.get(URL, {"class": "gpu-h100", "node": "node-a"}))
    assert list(only) == ["gpu-h100"] and only["gpu-h100"]["physical"]["total"] == 3


def test_bad_filters_are_400s_naming_the_parameter(api) -> None:
    """A pool without its driver and an unknown class are refused by name."""
    build_cluster()
    response = api.get(URL, {"pool": "node-a"})
    assert response.status_code == 400 and "pool" in response.json()
    response = api.get(URL, {"class": "no-such-class"})
    assert response.status_code == 400 and "class" in response.json()


def test_a_class_whose_selector_does_not_compile_is_listed_with_its_error(api) -> None:
    """Its counts are null and its compile error is given."""
    f.create(f.device_class_object("broken", expression="device.driver =="))
    entry = entries(api.get(URL))["broken"]
    assert entry["physical"] is None and entry["devices"] is None
    assert entry["error"]


def test_signed_in_people_read_it_strangers_do_not(api, anon_api, settings) -> None:
    """Cluster-scoped capacity: every signed-in person, nobody anonymous."""
    settings.PUBLIC_READ = False
    build_cluster()
    assert api.get(URL).status_code == 200
    assert anon_api.get(URL).status_code in (401, 403)


def test_schema_documents_the_endpoint(api) -> None:
    """The OpenAPI schema names the filters and the typed answer."""
    schema = yaml.safe_load(api.get("/api/schema/").content)
    operation = schema["paths"][URL]["get"]
    assert {p["name"] for p in operation["parameters"]} >= {"node", "pool", "driver", "class"}
    answer = schema["components"]["schemas"]["ClassAvailability"]
    assert {"deviceClass", "physical", "devices", "partitions"} <= set(answer["properties"])
    partition = schema["components"]["schemas"]["PartitionCounts"]
    assert {"profile", "total", "free"} <= set(partition["properties"])


def add_nodes(first: int, count: int) -> None:
    """More MIG nodes, each with a held slice."""
    for index in range(first, first + count):
        node = f"node-{index:03d}"
        f.create(
            f.node_object(node),
            f.slice_object(
                f"{node}-gpu",
                driver=GPU,
                pool=node,
                node=node,
                devices=[
                    *mig_gpu(0),
                    f.device_entry("gpu-1", attributes=attrs(type="gpu", model="h100")),
                ],
                counters={"gpu-0-counters": {"memory": "80Gi", "slices": "7"}},
            ),
            f.claim_object(
                f"user-{index}",
                results=[f.allocation_result("r", driver=GPU, pool=node, device="gpu-0-mig-3g")],
            ),
        )


def test_query_count_is_flat(api, django_assert_max_num_queries) -> None:
    """The answer costs the same queries for 5 nodes as for 40: two once the units are kept
    (the membership's and the holds' fingerprints), eight more right after the slices changed
    (the classes, the slices' versions, the devices, the changed devices' attributes, the
    holds, the units' devices, their slices' partition type attribute and their pools'
    counters)."""
    build_cluster()
    assert api.get(URL).status_code == 200  # the first computation: every device at once
    add_nodes(0, 3)
    with django_assert_max_num_queries(10) as changed_small:
        assert api.get(URL).status_code == 200
    with django_assert_max_num_queries(2) as kept_small:
        assert api.get(URL).status_code == 200
    add_nodes(3, 37)
    with django_assert_max_num_queries(10) as changed_large:
        body = entries(api.get(URL))
    with django_assert_max_num_queries(2) as kept_large:
        assert api.get(URL, {"node": "node-039"}).status_code == 200
    assert len(changed_large) == len(changed_small)
    assert len(kept_large) == len(kept_small)
    assert body["gpu-h100"]["physical"] == {"total": 3 + 80, "free": 2 + 40}
