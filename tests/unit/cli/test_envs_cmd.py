"""`turnopd envs build` fills the game cache; `envs check-expert` plays it; `serve` is registered."""

import json


def write_config(tmp_path) -> str:
    config = tmp_path / "envs.toml"
    config.write_text(
        f'[env_gateway]\ncache_dir = "{tmp_path / "cache"}"\n'
        "[env_gateway.household]\ngames_per_task_type_valid = 1\ngames_per_task_type_train = 2\n"
    )
    return str(config)


def test_build_generates_each_game_once(cli, tmp_path):
    config = write_config(tmp_path)
    result = cli(
        "envs", "build", "--env", "alfworld", "--split", "valid_unseen", "--config", config, "--jobs", "1"
    )
    assert result.code == 0, result.err
    games = sorted((tmp_path / "cache").rglob("*.tw-pddl"))
    assert len(games) == 6 and all("valid_unseen" in str(g) for g in games)
    stamp = games[0].stat().st_mtime_ns
    assert cli("envs", "build", "--env", "alfworld", "--split", "valid_unseen", "--config", config).code == 0
    assert games[0].stat().st_mtime_ns == stamp


def test_check_expert_reports_wins_per_task_type(cli, tmp_path):
    config = write_config(tmp_path)
    result = cli(
        "envs",
        "check-expert",
        "--env",
        "alfworld",
        "--split",
        "valid_unseen",
        "--config",
        config,
        "--jobs",
        "1",
    )
    assert result.code == 0, result.err
    summaries = [json.loads(line) for line in result.out.splitlines() if line.startswith("{")]
    assert len(summaries) == 6 and all(s["won"] == s["games"] == 1 for s in summaries)


def test_unknown_env_is_one_line_error(cli, tmp_path):
    result = cli("envs", "build", "--env", "minecraft", "--config", write_config(tmp_path))
    assert result.code == 2 and "unknown env ['minecraft']" in result.err


def test_serve_env_gateway_is_registered(cli):
    result = cli("serve", "env-gateway", "--help")
    assert result.code == 0 and "--workers" in result.out
