"""The household tasks (ALFWorld's PDDL domain, API name ``alfworld``): real ALFWorld games when
given, else rooms generated offline; the expert, the task types, and the backend."""
