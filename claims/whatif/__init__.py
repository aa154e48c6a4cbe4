"""What-if, headroom and pending-claim diagnosis over the synced cluster.

The parts: input text (`inputs`), documents to pods (`pods`, with `workloads` and `extended` for
the scheduler's implicit claims), options (`options`), the cluster as listed from the database
(`listing`), the cached listing and assumed changes (`state`), the scheduler's node filters
(`nodefilter`), the allocation runs (`simulation`, `engine`, `headroom`), pods placed in turn
(`placement`), the API server's refusals (`admission`), quota (`quota`), the service entry point
(`service`), the one request path of the REST API, the what-if page and jobs (`request`), the
job store (`jobs`) and diagnoses of pending claims (`diagnosis`).
`inputs` and `quota` need no Django: the demo cluster uses them outside it.
"""
