"""Who may see what in the demo cluster: two teams with different rights, as RBAC objects the
fake API server answers SubjectAccessReviews from.

team-a may read team-a and ml-training, team-b may read team-b and inference (groups of those
names, as an OIDC provider or the demo's local accounts `alice` and `bob` carry them); members of
`dra-admins` may read every namespace. Nobody is granted dra-admin: it stays an admin's view.
"""

from __future__ import annotations

from typing import Any

from demo.catalog import ADMIN_NAMESPACE, WORKLOAD_NAMESPACES

RBAC_GROUP = "rbac.authorization.k8s.io"
READER = "dra-demo-namespace-reader"
# group -> the namespaces it may read.
TEAMS: dict[str, tuple[str, ...]] = {
    "team-a": ("team-a", "ml-training"),
    "team-b": ("team-b", "inference"),
}
ADMINS_GROUP = "dra-admins"


def demo_rbac() -> list[dict[str, Any]]:
    """The ClusterRole the teams are bound to, one RoleBinding per team and namespace, and the
    admins' ClusterRoleBinding."""
    assert all(ns in WORKLOAD_NAMESPACES for spaces in TEAMS.values() for ns in spaces)
    assert ADMIN_NAMESPACE not in {ns for spaces in TEAMS.values() for ns in spaces}
    reader = {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": READER},
        "rules": [
            {
                "apiGroups": [""],
                "resources": ["pods", "resourcequotas", "limitranges"],
                "verbs": ["get", "list", "watch"],
            },
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims", "resourceclaimtemplates"],
                "verbs": ["get", "list", "watch"],
            },
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list"]},
        ],
    }
    bindings = [
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"{group}-reads", "namespace": namespace},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": READER},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group}],
        }
        for group, namespaces in TEAMS.items()
        for namespace in namespaces
    ]
    admins = {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{ADMINS_GROUP}-read-all"},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": READER},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": ADMINS_GROUP}],
    }
    return [reader, *bindings, admins]
