"""What-if, headroom and pending-claim diagnosis over the synced cluster.

The parts: input text (`inputs`), documents to pods (`pods`, with `workloads` and `extended` for
the scheduler's implicit claims), what a pod asks once stored (`resources`: PodRequests and
PodLimits, host ports, LimitRange defaults; `podasks`), options (`options`), the cluster as
listed from the database (`listing`, with what each node's pods request), the cached listing and
assumed changes (`state`), the scheduler's node filters (`nodefilter`; NodePorts and
NodeResourcesFit in `nodefit`, PodTopologySpread and InterPodAffinity in `podtopology`), the
allocation runs (`simulation`, `engine`, `headroom`), pods placed in turn (`placement`), the API
server's refusals (`admission`), quota (`quota`), the service entry point (`service`), the one
request path of the REST API, the what-if page and jobs (`request`), the job store (`jobs`) and
diagnoses of pending claims (`diagnosis`). `inputs`, `resources`, `nodefit`, `podtopology`,
`podasks` and `quota` need no Django: the demo cluster and the sync use them outside it.
"""
