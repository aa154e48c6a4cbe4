"""What-if, headroom and pending-claim diagnosis over the synced cluster.

The parts: input parsing (`inputs`), options (`options`), the cached cluster state and assumed
changes (`state`), the allocation runs (`engine`), quota admission (`quota`), the service entry
point (`service.what_if`) and diagnoses of pending claims (`diagnosis.diagnose_all`).
"""
