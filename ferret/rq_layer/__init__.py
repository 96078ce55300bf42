"""The RQ wing: everything in Ferret that talks to RQ, and the only code that imports it.

- ``producer_side``: putting a job envelope on an RQ queue and reading a job's RQ state.
- ``entry``: the function RQ calls for a Ferret job (into ``ferret.worker.core.run``).
- ``runner``: Ferret's RQ worker classes, with ``intake`` (only Ferret jobs leave a
  queue), ``bookkeeping`` (RQ's records with fewer round trips), ``maintenance``
  (RQ's registry maintenance, safe for untrusted entries) and ``reaper`` (jobs
  whose worker died).

Importing this package imports nothing; the producer imports ``producer_side``
alone, which imports nothing of the worker.
"""
