"""Operations, apart from the data path: starting and stopping the run's services (`stack.py`),
the controller handle that stays valid across a replacement, every service behind one lifecycle
interface (`managed_service.py`; one module per service, `redis_ops.py` .. `learner_ops.py`; a
run's listed by `run_services.py`), `turnopd restart` and `turnopd scale` (`restarts.py`, carried out
between steps by `restart_loop.py`; the rules every restart keeps, `restart_rules.py`; what a restart may change is each service settings type's `RESTARTABLE`), `turnopd status` (`live_status.py`, `service_probes.py`, `pool_load.py`) and
the `run-control` actor the CLI reaches them through (`run_control.py`, `run_client.py`).

The step pipeline (`services/orchestrator/`) uses the handles the stack gives it; nothing here
imports the pipeline.
"""
