"""rollcage grading kit plugin. PYTEST_DONT_REWRITE"""
# rollcage grading kit: the pytest plugin that reports each test's status.
# Loaded by the kit's sitecustomize before any code of the repository; it
# holds no key and signs nothing: it raises an audit event per record, and
# the kit's audit hook takes records only from this module's code called
# by pluggy.
import sys

import pytest

_audit = getattr(sys, "audit", None)  # the kit sets its own before 3.8
_str = str
_getattr = getattr
_type, _list, _tuple, _len = type, list, tuple, len

_HOOKS = ("pytest_runtest_makereport", "pytest_runtest_logreport", "pytest_report_teststatus",
          "pytest_runtest_protocol", "pytest_pyfunc_call", "pytest_runtest_call", "pytest_runtest_setup",
          "pytest_runtest_teardown", "pytest_terminal_summary", "pytest_sessionfinish",
          "pytest_collection_modifyitems", "pytest_runtestloop", "pytest_deselected", "pytest_collectreport",
          "pytest_itemcollected", "pytest_collection_finish", "pytest_assertrepr_compare", "pytest_assertion_pass")


def pytest_runtest_logreport(report):
    xfail = "xfail" if _getattr(report, "wasxfail", None) is not None else ""
    _audit("rollcage.grade", "rep", _str(report.nodeid), _str(report.when), _str(report.outcome), xfail)
    if report.when == "call":
        # A batch of differential cases keeps each case's outcome in the
        # item's properties (rollcage_grade_enc.cases): exact strs only.
        props = _getattr(report, "user_properties", None)
        for p in (props if _type(props) is _list else ()):
            if _type(p) is _tuple and _len(p) == 2 and _type(p[0]) is _str and _type(p[1]) is _str and p[0] == "rollcage_case":
                _audit("rollcage.grade", "case", _str(report.nodeid), p[1])


def pytest_collectreport(report):
    if report.outcome != "passed":
        _audit("rollcage.grade", "col", _str(report.nodeid), _str(report.outcome))


def pytest_runtest_logfinish(nodeid, location):
    _audit("rollcage.grade", "check")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    # Hook implementations of the repository's own (conftest.py, plugins)
    # on the hooks that decide or report outcomes; the grader weighs them
    # against the files the submission changed.
    pm = session.config.pluginmanager
    for name in _HOOKS:
        caller = _getattr(pm.hook, name, None)
        if caller is None:
            continue
        for impl in caller.get_hookimpls():
            code = _getattr(impl.function, "__code__", None)
            f = code.co_filename if code is not None else ""
            kind = "wrapper" if (impl.hookwrapper or _getattr(impl, "wrapper", False)) else "impl"
            _audit("rollcage.grade", "hook", name, _str(f), kind)
    _audit("rollcage.grade", "check")
    _audit("rollcage.grade", "end", _str(int(exitstatus)))
