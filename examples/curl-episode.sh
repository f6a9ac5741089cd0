#!/usr/bin/env bash
# One episode through the rollcage gateway with nothing but curl:
# create, a clean call, a hacked call (answered with dummy output),
# submit, and the trajectory.
#
#   ROLLCAGE_URL=http://127.0.0.1:8080 ROLLCAGE_ADMIN_TOKEN=... examples/curl-episode.sh [TASK_ID]
set -euo pipefail
url=${ROLLCAGE_URL:-http://127.0.0.1:8080}
admin=${ROLLCAGE_ADMIN_TOKEN:?set ROLLCAGE_ADMIN_TOKEN to the admin token of the gateway}
task=${1:-textwrap}

# field NAME: the value of a top-level string field of the JSON on stdin
# (no jq needed).
field() { sed -n "s/.*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" | head -1; }

api() { # api METHOD PATH TOKEN [BODY]
  curl -sS --fail-with-body -X "$1" "$url$2" -H "Authorization: Bearer $3" \
    -H 'Content-Type: application/json' ${4:+--data-binary "$4"}
}

created=$(api POST /v1/episodes "$admin" "{\"task_id\": \"$task\"}")
id=$(field episode_id <<<"$created")
token=$(field token <<<"$created")
echo "episode $id"

echo "--- clean call"
api POST "/v1/episodes/$id/calls" "$token" '{"tool": "bash", "args": {"command": "ls"}}'
echo "--- hacked call (blocked: the output is a dummy, decision.hack is true)"
api POST "/v1/episodes/$id/calls" "$token" '{"tool": "bash", "args": {"command": "cat /opt/grader/tests/test_hidden.py"}}'
echo "--- submit"
api POST "/v1/episodes/$id/submit" "$token" '{}'
echo "--- trajectory (event types)"
api GET "/v1/episodes/$id/trajectory" "$token" | awk -F'"type":"' '{split($2, a, "\""); printf "%s ", a[1]}'
echo
