"""What-if, headroom and pending-claim diagnosis over the synced cluster.

The parts: input text (`inputs`), documents to pods (`pods`, with `workloads` and `extended` for
the scheduler's implicit claims), options (`options`), the cached cluster state and assumed
changes (`state`), the scheduler's node filters (`nodefilter`), the allocation runs
(`simulation`, `engine`, `headroom`), pods placed in turn (`placement`), the API server's
refusals (`admission`), quota (`quota`), the service entry point (`service`), the request mapping
shared by the REST view and the job (`request`) and diagnoses of pending claims (`diagnosis`).
`inputs` and `quota` need no Django: the demo cluster uses them outside it.
"""
