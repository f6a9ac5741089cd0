package task

// Facts read from SWE-bench's and SWE-Gym's harness constants by a
// throwaway script; edit by hand when those specs change.

// sweBenchSpecs are the test command, and the install step and environment
// commands run before it, that SWE-bench's harness runs per repository and
// version: swebench/harness/constants/python.py at commit 03b6fa9, the last
// with per-repository specs. SWE-Gym's are from its SWE-Bench-Fork,
// swebench/harness/constants.py at 242429c.
var sweBenchSpecs = map[string][]repoSpec{
	"astropy/astropy": {
		{versions: []string{"3.0", "3.1", "3.2", "4.1", "4.2", "4.3", "5.0", "5.1", "5.2", "v5.3"}, testCmd: "pytest -rA", install: "python -m pip install -e .[test] --verbose"},
		{versions: []string{"0.1", "0.2", "0.3", "0.4", "1.1", "1.2", "1.3"}, testCmd: "pytest -rA -vv -o console_output_style=classic --tb=no", install: "python -m pip install -e .[test] --verbose"},
	},
	"django/django": {
		{versions: []string{"1.10", "1.11", "1.7", "1.8", "2.0", "2.1", "2.2"}, testCmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", install: "python setup.py install", evalCommands: []string{"export LANG=en_US.UTF-8", "export LC_ALL=en_US.UTF-8", "export PYTHONIOENCODING=utf8", "export LANGUAGE=en_US:en"}},
		{versions: []string{"1.9"}, testCmd: "./tests/runtests.py --verbosity 2", install: "python setup.py install", evalCommands: []string{"export LANG=en_US.UTF-8", "export LC_ALL=en_US.UTF-8", "export PYTHONIOENCODING=utf8", "export LANGUAGE=en_US:en"}},
		{versions: []string{"1.4", "1.5", "1.6"}, testCmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", install: "python setup.py install"},
		{versions: []string{"3.0", "3.1", "3.2"}, testCmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", install: "python -m pip install -e .", evalCommands: []string{"sed -i '/en_US.UTF-8/s/^# //g' /etc/locale.gen && locale-gen", "export LANG=en_US.UTF-8", "export LANGUAGE=en_US:en", "export LC_ALL=en_US.UTF-8"}},
		{versions: []string{"4.0", "4.1", "4.2", "5.0", "5.1", "5.2"}, testCmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1", install: "python -m pip install -e ."},
	},
	"marshmallow-code/marshmallow": {
		{versions: []string{"2.18", "2.19", "2.20", "3.0", "3.1", "3.10", "3.11", "3.12", "3.13", "3.15", "3.16", "3.19", "3.2", "3.4", "3.8", "3.9"}, testCmd: "pytest -rA", install: "python -m pip install -e '.[dev]'"},
	},
	"matplotlib/matplotlib": {
		{versions: []string{"3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
		{versions: []string{"3.8", "3.9"}, testCmd: "pytest -rA", install: "python -m pip install --no-build-isolation -e \".[dev]\""},
		{versions: []string{"1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "2.0", "2.1", "2.2"}, testCmd: "pytest -rA", install: "python setup.py build; python setup.py install"},
	},
	"mwaskom/seaborn": {
		{versions: []string{"0.11"}, testCmd: "pytest --no-header -rA", install: "python -m pip install -e ."},
		{versions: []string{"0.12", "0.13", "0.14"}, testCmd: "pytest --no-header -rA", install: "python -m pip install -e .[dev]"},
	},
	"pallets/flask": {
		{versions: []string{"2.0", "2.1", "2.2", "2.3", "3.0", "3.1"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"psf/requests": {
		{versions: []string{"0.11", "0.13", "0.14", "0.7", "0.8", "0.9", "1.1", "1.2", "2.0", "2.10", "2.11", "2.12", "2.17", "2.18", "2.19", "2.2", "2.22", "2.25", "2.26", "2.27", "2.3", "2.31", "2.4", "2.5", "2.7", "2.8", "2.9", "3.0"}, testCmd: "pytest -rA", install: "python -m pip install ."},
	},
	"pvlib/pvlib-python": {
		{versions: []string{"0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"}, testCmd: "pytest -rA", install: "python -m pip install -e .[all]"},
	},
	"pydata/xarray": {
		{versions: []string{"0.12", "0.18", "0.19", "0.20", "2022.03", "2022.06", "2022.09", "2023.07", "2024.05"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"pydicom/pydicom": {
		{versions: []string{"1.0", "1.1", "1.2", "1.3", "1.4", "2.0", "2.1", "2.2", "2.3", "2.4", "3.0"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"pylint-dev/astroid": {
		{versions: []string{"2.10", "2.12", "2.13", "2.14", "2.15", "2.16", "2.5", "2.6", "2.7", "2.8", "2.9", "3.0"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"pylint-dev/pylint": {
		{versions: []string{"2.10", "2.11", "2.13", "2.14", "2.15", "2.16", "2.17", "2.8", "2.9", "3.0", "3.1", "3.2", "3.3", "4.0"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"pytest-dev/pytest": {
		{versions: []string{"4.4", "4.5", "4.6", "5.0", "5.1", "5.2", "5.3", "5.4", "6.0", "6.2", "6.3", "7.0", "7.1", "7.2", "7.4", "8.0", "8.1", "8.2", "8.3", "8.4"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"pyvista/pyvista": {
		{versions: []string{"0.20", "0.21", "0.22", "0.23", "0.24", "0.25", "0.26", "0.27", "0.28", "0.29", "0.30", "0.31", "0.32", "0.33", "0.34", "0.35", "0.36", "0.37", "0.38", "0.39", "0.40", "0.41", "0.42", "0.43"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"scikit-learn/scikit-learn": {
		{versions: []string{"0.20", "0.21", "0.22", "1.3", "1.4", "1.5", "1.6"}, testCmd: "pytest -rA", install: "python -m pip install -v --no-use-pep517 --no-build-isolation -e ."},
	},
	"sphinx-doc/sphinx": {
		{versions: []string{"1.5", "1.6", "1.7", "1.8", "2.0", "2.1", "2.2", "2.3", "2.4", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "4.0", "4.1", "4.2", "4.3", "4.4", "4.5", "5.0", "5.1", "5.2", "5.3", "6.0", "6.2", "7.0", "7.1", "7.2", "7.3", "7.4", "8.0", "8.1"}, testCmd: "tox --current-env -epy39 -v --", install: "python -m pip install -e .[test]"},
	},
	"sqlfluff/sqlfluff": {
		{versions: []string{"0.10", "0.11", "0.12", "0.13", "0.4", "0.5", "0.6", "0.8", "0.9", "1.0", "1.1", "1.2", "1.3", "1.4", "2.0", "2.1", "2.2"}, testCmd: "pytest -rA", install: "python -m pip install -e ."},
	},
	"sympy/sympy": {
		{versions: []string{"0.7", "1.0", "1.1", "1.10", "1.11", "1.12", "1.13", "1.14", "1.2", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9"}, testCmd: "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose", install: "python -m pip install -e ."},
	},
}

// sweGymSpecs are SWE-Gym's, for the repositories SWE-bench does not have.
// python/mypy is left out: its command selects tests with -k.
var sweGymSpecs = map[string][]repoSpec{
	"bokeh/bokeh": {
		{versions: []string{"3.0", "3.3", "3.4", "3.5"}, testCmd: "pytest -rA -n0", install: "python -m pip install -e .; python -m pip install bokeh_sampledata;"},
		{versions: []string{"0.10", "0.11", "0.1181316818", "0.12", "0.13", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0", "1.1", "1.2", "1.3", "1.4", "2.0", "2.1", "2.3", "2.4"}, testCmd: "pytest -rA -n0", install: "pip install \"setuptools<66\" \"jinja2<3.1\"; printf \"1\n\" | python setup.py develop; bokeh sampledata;"},
	},
	"conan-io/conan": {
		{versions: []string{"1.33", "1.34", "1.35", "1.36", "1.37", "1.38", "1.39", "1.40", "1.41", "1.42", "1.43", "1.44", "1.45", "1.46", "1.47", "1.48", "1.49", "1.50", "1.51", "1.52", "1.53", "1.54", "1.55", "1.57", "1.58", "1.59", "2.0"}, testCmd: "pytest -n0 -rA", install: "echo 'cython<3' > /tmp/constraint.txt; export PIP_CONSTRAINT=/tmp/constraint.txt; python -m pip install -r conans/requirements.txt; python -m pip install -r conans/requirements_server.txt; python -m pip install -r conans/requirements_dev.txt ", evalCommands: []string{"export PYTHONPATH=${PYTHONPATH:-}:$(pwd)"}},
		{versions: []string{"1.60", "1.61", "1.62", "2.1", "2.2", "2.3", "2.4"}, testCmd: "pytest -n0 -rA", install: "python -m pip install -r conans/requirements.txt; python -m pip install -r conans/requirements_server.txt; python -m pip install -r conans/requirements_dev.txt ", evalCommands: []string{"export PYTHONPATH=${PYTHONPATH:-}:$(pwd)"}},
	},
	"dask/dask": {
		{versions: []string{"2.11", "2.12", "2.13", "2.14", "2.15", "2.16", "2.17", "2.18", "2.19", "2.21", "2.22", "2.23", "2.25", "2.26", "2.27", "2.28", "2.29", "2.30", "2020.12", "2021.01", "2021.02", "2021.03", "2021.04", "2021.05", "2021.06", "2021.07", "2021.08", "2021.09", "2021.10", "2021.11", "2021.12", "2022.01", "2022.02", "2022.03", "2022.04", "2022.05", "2022.10", "2022.11", "2022.12", "2022.6", "2022.7", "2022.8", "2022.9", "2023.1", "2023.10", "2023.11", "2023.12", "2023.2", "2023.3", "2023.4", "2023.5", "2023.6", "2023.7", "2023.8", "2023.9", "2024.1", "2024.2", "2024.3", "2024.4", "2024.5"}, testCmd: "pytest -n0 -rA  --color=no", install: "python -m pip install --no-deps -e ."},
	},
	"facebookresearch/hydra": {
		{versions: []string{"0.1", "0.10", "0.11", "0.12", "0.9", "1.0", "1.1", "1.2"}, testCmd: "pytest -rA --tb=long", install: "sed -i 's|isort@git+git://github.com/timothycrosley/isort|isort@git+https://github.com/timothycrosley/isort|g' requirements/dev.txt; { tail -n1 requirements/requirements.txt | grep -q \".\" && echo \"\"; } >> requirements/requirements.txt; echo \"pip==24.0\" >> requirements/requirements.txt;pip install \"pip==24.0\"; pip install -r requirements/dev.txt; pip install -e .;"},
		{versions: []string{"1.3", "1.4"}, testCmd: "pytest -rA --tb=long", install: "pip install -r requirements/dev.txt; pip install -e .;"},
	},
	"getmoto/moto": {
		{versions: []string{"0.4", "1.0", "1.2", "1.3", "2.0", "2.1", "2.2", "2.3", "3.0", "3.1", "4.0", "4.1", "4.2", "5.0"}, testCmd: "pytest -n0 -rA", install: "make init"},
	},
	"hypothesisworks/hypothesis": {
		{versions: []string{"3.55", "3.59", "3.60", "3.61", "3.63", "3.66", "3.67", "3.68", "3.69", "3.70", "3.71", "3.73", "3.75", "3.79", "3.82", "3.85", "3.86", "3.88", "4.0", "4.12", "4.14", "4.15", "4.18", "4.2", "4.23", "4.24", "4.26", "4.32", "4.38", "4.4", "4.40", "4.42", "4.44", "4.46", "4.50", "4.54", "4.55", "5.1", "5.10", "5.12", "5.15", "5.2", "5.20", "5.23", "5.24", "5.32", "5.33", "5.36", "5.38", "5.4", "5.41", "5.42", "5.43", "5.47", "5.5", "5.6", "5.8", "5.9", "6.1", "6.100", "6.102", "6.13", "6.14", "6.18", "6.21", "6.24", "6.28", "6.29", "6.30", "6.31", "6.36", "6.4", "6.40", "6.43", "6.45", "6.46", "6.47", "6.50", "6.53", "6.54", "6.59", "6.6", "6.62", "6.66", "6.71", "6.74", "6.77", "6.8", "6.81", "6.87", "6.88", "6.93", "6.98", "6.99"}, testCmd: "pytest -n0 -rA --tb=no --no-header", install: "python -m pip install -r requirements/test.txt; python -m pip install -e hypothesis-python/;"},
	},
	"iterative/dvc": {
		{versions: []string{"0.1", "0.12", "0.13", "0.14", "0.15", "0.16", "0.17", "0.18", "0.19", "0.20", "0.21", "0.22", "0.23", "0.24", "0.27", "0.28", "0.29", "0.30", "0.31", "0.32", "0.33", "0.34", "0.35", "0.40", "0.41", "0.50", "0.51", "0.52", "0.53", "0.54", "0.55", "0.56", "0.57", "0.58", "0.59", "0.60", "0.61", "0.62", "0.63", "0.65", "0.66", "0.68", "0.69", "0.70", "0.71", "0.74", "0.75", "0.76", "0.77", "0.78", "0.8", "0.80", "0.81", "0.82", "0.83", "0.84", "0.85", "0.86", "0.87", "0.88", "0.89", "0.9", "0.90", "0.91", "0.92", "0.93", "1.0", "1.1", "1.10", "1.11", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "1.8", "1.9", "2.0", "2.1", "2.10", "2.11", "2.12", "2.13", "2.15", "2.17", "2.19", "2.2", "2.20", "2.21", "2.22", "2.23", "2.24", "2.27", "2.28", "2.3", "2.30", "2.33", "2.34", "2.35", "2.38", "2.4", "2.41", "2.43", "2.44", "2.45", "2.46", "2.48", "2.5", "2.50", "2.51", "2.52", "2.54", "2.55", "2.56", "2.57", "2.58", "2.6", "2.7", "2.8", "2.9", "3.0", "3.1", "3.2", "3.3"}, testCmd: "pytest -rA", install: "python -m pip install --upgrade pip wheel GitPython; python -m pip install \"cython<3.0.0\" && python -m pip install --no-build-isolation pyyaml==5.4.1; python -m pip install git+https://github.com/iterative/mock-ssh-server.git || true; python -m pip install -r tests/requirements.txt || true; python -m pip install -r test-requirements.txt || true; python -m pip install -e \".[tests,dev,all_remotes,all,testing]\"; python -m pip install \"numpy<=1.20\"; python -m pip install \"pytest<8\";"},
		{versions: []string{"3.10", "3.11", "3.12", "3.13", "3.14", "3.15", "3.17", "3.19", "3.23", "3.24", "3.28", "3.29", "3.36", "3.37", "3.38", "3.4", "3.43", "3.47", "3.48", "3.49", "3.5", "3.6"}, testCmd: "pytest -rA", install: "python -m pip install --upgrade pip wheel GitPython; python -m pip install \"cython<3.0.0\" && python -m pip install --no-build-isolation pyyaml==5.4.1; python -m pip install git+https://github.com/iterative/mock-ssh-server.git || true; python -m pip install -r tests/requirements.txt || true; python -m pip install -r test-requirements.txt || true; python -m pip install -e \".[tests,dev,all_remotes,all,testing]\";"},
	},
	"modin-project/modin": {
		{versions: []string{"0.1", "0.10", "0.11", "0.12", "0.13", "0.14", "0.15", "0.16", "0.17", "0.18", "0.19", "0.2", "0.3", "0.4", "0.6", "0.8", "0.9"}, testCmd: "pytest -n0 -rA", install: "python -m pip install -e .; python -m pip install numpy==1.23.1 protobuf==3.20.1;"},
		{versions: []string{"0.20", "0.21", "0.22", "0.23", "0.24", "0.25", "0.26", "0.27", "0.28", "0.29", "0.30"}, testCmd: "pytest -n0 -rA", install: "python -m pip install -e .;"},
	},
	"pandas-dev/pandas": {
		{versions: []string{"0.16", "0.17", "0.18", "0.19", "0.20", "0.21", "0.22", "0.23", "0.24", "0.25", "0.26", "1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "2.0", "2.1"}, testCmd: "pytest -rA --tb=long", install: "python -m pip install 'numpy<2'; python -m pip install -ve . --no-build-isolation -Ceditable-verbose=true; pip uninstall pytest-qt -y;"},
		{versions: []string{"2.2", "3.0"}, testCmd: "pytest -rA --tb=long", install: "python -m pip install -ve . --no-build-isolation -Ceditable-verbose=true; pip uninstall pytest-qt -y;"},
	},
	"project-monai/monai": {
		{versions: []string{"0.1", "0.105", "0.11", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0", "1.1", "1.2", "1.3"}, testCmd: "pytest -rA ", install: "sed -i '/^git+https:\\/\\/github.com\\/Project-MONAI\\//d' requirements-dev.txt; python -m pip install types-pkg-resources==0.1.3 pytest; pip install -r requirements-dev.txt;python setup.py develop;"},
	},
	"pydantic/pydantic": {
		{versions: []string{"0.10", "0.11", "0.13", "0.14", "0.15", "0.151", "0.17", "0.18", "0.2", "0.20", "0.201", "0.24", "0.27", "0.29", "0.32", "0.4", "0.41", "0.6", "0.9", "1.01", "1.10", "1.31", "1.4", "1.41", "1.5", "1.51", "1.6", "1.7", "1.71", "1.8", "1.9", "2.0", "2.01", "2.02", "2.03", "2.04", "2.4", "2.5", "2.6", "2.7"}, testCmd: "pytest -rA --tb=short -vv -o console_output_style=classic --no-header", install: "export PATH=\"$HOME/.local/bin:$PATH\"; pdm add pre-commit; make install;"},
	},
	"spyder-ide/spyder": {},
}
