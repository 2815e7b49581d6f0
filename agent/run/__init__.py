"""run: one task from start to finish, above the method (agent.pgs) and the loop (agent.core):
the task, opening the sandbox, choosing the reviewer, the run's configuration, its hooks, its
log and its output files, and several attempts on one issue."""
