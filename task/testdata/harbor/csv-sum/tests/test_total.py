import subprocess


def test_total():
    out = subprocess.run(["python", "/app/total.py"], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "7"
