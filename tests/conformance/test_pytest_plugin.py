"""The pytest plugin, driven by ``pytester``: inert unless opted in; one item per scenario against
an ASGI app in process or a URL; failures carry the reproduction; settings from the config file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.catalogue import CATALOGUE
from conformance.model import Harness
from receiver.server import running_server
from tests.conformance.broken_receivers import PROBE_TOKEN, plain_receiver
from tests.conformance.support import SECRET, other_schemes_only

pytest_plugins = ["pytester"]

C_COUNT = len(CATALOGUE.tagged(Harness.C))

APPS = f"""
import base64
from receiver.app import ReceiverSettings, create_app
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

SECRET = {SECRET!r}


def reference():
    import tempfile, os
    db = os.path.join(tempfile.mkdtemp(), "inbox.sqlite")
    return create_app(ReceiverSettings(secrets=[SECRET], db=db, probe_token="tok"))


async def _accept_everything(request):
    await request.body()
    return JSONResponse({{"ok": True}})


accepts_everything = Starlette(routes=[Route("/webhooks", _accept_everything, methods=["POST"])])
"""


@pytest.fixture
def apps(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(partner_apps=APPS)
    pytester.syspathinsert()
    return pytester


def test_the_plugin_is_inert_without_its_options(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_ordinary():\n    assert True\n")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "hookproof::" not in result.stdout.str()
    assert "collected 1 item" in result.stdout.str()


def test_one_item_per_scenario_against_an_app_in_process(apps: pytest.Pytester) -> None:
    apps.makepyfile(conftest="import partner_apps\napp = partner_apps.reference()\n")
    # the reference receiver's body limit, declared; no real-time patience in a unit test
    apps.makefile(".toml", hookproof="max_body = 1048576\npatience = 0\n")
    result = apps.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--hookproof-app",
        "conftest:app",
        "--hookproof-secret",
        SECRET,
        "--hookproof-probe",
        "/_hookproof/events",
        "--hookproof-probe-token",
        "tok",
        "-v",
    )
    skipped = len(other_schemes_only())
    result.assert_outcomes(passed=C_COUNT - skipped, skipped=skipped)
    result.stdout.fnmatch_lines(["*hookproof::signature.valid PASSED*"])


def test_failures_carry_the_guarantee_and_the_curl_reproduction(apps: pytest.Pytester) -> None:
    result = apps.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--hookproof-app",
        "partner_apps:accepts_everything",
        "--hookproof-secret",
        SECRET,
        "--hookproof-select",
        "signature",
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) >= 5
    text = result.stdout.str()
    assert "signature.tampered-body [must]" in text
    assert "guarantee: A body changed after signing is refused with 401" in text
    assert "reproduce:" in text
    assert "curl -sS -i -X POST http://hookproof.test/webhooks" in text
    assert "v1,<redacted>" in text
    assert SECRET not in text


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with running_server(plain_receiver(SECRET)) as base:
        yield base


def test_a_url_with_settings_from_the_config_file(
    pytester: pytest.Pytester, served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOKPROOF_TEST_SECRET", SECRET)
    pytester.makefile(
        ".toml",
        hookproof=(
            f"url = '{served}/webhooks'\nsecret = '${{HOOKPROOF_TEST_SECRET}}'\n"
            f"probe = '{served}/_hookproof/events'\nprobe_token = '{PROBE_TOKEN}'\n"
            "select = ['clock', 'idempotency']\n"
        ),
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--hookproof")
    expected = len([s for s in CATALOGUE.tagged(Harness.C) if s.family in ("clock", "idempotency")])
    result.assert_outcomes(passed=expected)


def test_an_unreachable_url_fails_every_item_in_one_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "-p",
        "no:cacheprovider",
        "--hookproof-url",
        "http://127.0.0.1:9/webhooks",
        "--hookproof-secret",
        SECRET,
        "--hookproof-select",
        "signature.valid",
    )
    result.assert_outcomes(failed=1)
    assert "never answered" in result.stdout.str()


def test_the_app_is_imported_from_the_rootdir_like_uvicorn_does(
    pytester: pytest.Pytester,
) -> None:
    # no syspathinsert, and not the working directory (``python -m pytest`` puts that on
    # sys.path): the module sits in the rootdir only, as a partner's app.py would
    project = pytester.mkdir("project")
    (project / "partner_app.py").write_text(APPS)
    (project / "pytest.ini").write_text("[pytest]\n")
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(project),
        "--hookproof-app",
        "partner_app:accepts_everything",
        "--hookproof-secret",
        SECRET,
        "--hookproof-select",
        "signature.valid",
    )
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("no_such_module:app", "cannot import 'no_such_module'"),
        ("partner_apps:nothing_here", "has no attribute 'nothing_here'"),
        ("exploding:app", "importing 'exploding' raised RuntimeError: boom"),
        ("no-colon", "an app is named 'module:attribute'"),
    ],
)
def test_a_bad_app_is_one_usage_error_not_one_failure_per_scenario(
    apps: pytest.Pytester, spec: str, said: str
) -> None:
    apps.makepyfile(exploding="raise RuntimeError('boom')\n")
    result = apps.runpytest_inprocess(
        "-p", "no:cacheprovider", "--hookproof-app", spec, "--hookproof-secret", SECRET
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert said in result.stderr.str()
    assert "hookproof::" not in result.stdout.str()


def test_a_secret_that_is_not_whsec_is_one_warning_before_the_run(apps: pytest.Pytester) -> None:
    apps.makepyfile(conftest="import partner_apps\napp = partner_apps.reference()\n")
    result = apps.runpytest_inprocess(
        "-p", "no:cacheprovider", "--hookproof-app", "conftest:app",
        "--hookproof-secret", "not-a-whsec-secret", "--hookproof-select", "signature.valid",
    )  # fmt: skip
    warnings = [line for line in result.outlines if line.startswith("hookproof: warning:")]
    assert len(warnings) == 1
    assert "whsec_" in warnings[0]


@pytest.mark.parametrize("option", ["--hookproof-timeout", "--hookproof-settle"])
def test_a_duration_option_takes_a_duration_and_a_bad_one_is_one_usage_error(
    apps: pytest.Pytester, option: str
) -> None:
    apps.makepyfile(conftest="import partner_apps\napp = partner_apps.reference()\n")
    base = ["-p", "no:cacheprovider", "--hookproof-app", "conftest:app", "--hookproof-secret"]
    chosen = ["--hookproof-select", "signature.valid"]
    good = apps.runpytest_inprocess(*base, SECRET, *chosen, option, "2500ms")
    good.assert_outcomes(passed=1)
    bad = apps.runpytest_inprocess(*base, SECRET, *chosen, option, "soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    assert f"{option}: 'soon' is not a duration" in bad.stderr.str()


def test_the_settle_option_reaches_the_runs_settings(pytester: pytest.Pytester) -> None:
    from conformance.pytest_plugin import _Session

    config = pytester.parseconfig(
        "--hookproof-url", "http://127.0.0.1:9/webhooks", "--hookproof-secret", SECRET,
        "--hookproof-settle", "1.5s",
    )  # fmt: skip
    assert _Session(config).settings().settle == 1.5
    config = pytester.parseconfig("--hookproof-url", "http://x/", "--hookproof-secret", SECRET)
    assert _Session(config).settings().settle == 0


def test_the_scheme_help_written_by_hand_names_every_scheme() -> None:
    """The plugin must not import hookproof at load, so its --hookproof-scheme help lists the
    schemes by hand; this keeps that list whole."""
    from conformance import pytest_plugin
    from receiver.signing import SCHEMES

    source = Path(pytest_plugin.__file__).read_text()
    help_text = source.split('"--hookproof-scheme"', 1)[1].split("group.addoption", 1)[0]
    assert all(name in help_text for name in SCHEMES), sorted(SCHEMES)


COUNTING_APP = """
import os
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route


async def _count(request):
    await request.body()
    with open(os.environ["HOOKPROOF_TEST_COUNT_FILE"], "a") as seen:
        seen.write(request.headers.get("webhook-id", "-") + "\\n")
    return JSONResponse({"ok": True})


app = Starlette(routes=[Route("/webhooks", _count, methods=["POST"])])
"""


@pytest.mark.parametrize(
    "deselect", [("-k", "not late"), ("--deselect", "hookproof::idempotency.late-duplicate")]
)
def test_a_scenario_deselected_by_pytest_sends_nothing_early(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, deselect: tuple[str, str]
) -> None:
    # the late duplicate's first copy leaves before the first scenario; deselected by pytest,
    # the scenario sends nothing, exactly as when hookproof's own selection leaves it out
    pytester.makepyfile(counting_app=COUNTING_APP)
    pytester.syspathinsert()
    base = ("-p", "no:cacheprovider", "--hookproof-app", "counting_app:app")
    base += ("--hookproof-secret", SECRET, "--hookproof-select", "signature.valid")

    def ids_received(*extra: str, deselected: int) -> list[str]:
        count_file = pytester.path / f"count-{deselected}.txt"
        count_file.write_text("")
        monkeypatch.setenv("HOOKPROOF_TEST_COUNT_FILE", str(count_file))
        result = pytester.runpytest_inprocess(*base, *extra)
        result.assert_outcomes(passed=1, deselected=deselected)
        return count_file.read_text().split()

    alone = ids_received(deselected=0)
    late = ("--hookproof-select", "idempotency.late-duplicate")
    assert len(ids_received(*late, *deselect, deselected=1)) == len(alone)  # not one more
