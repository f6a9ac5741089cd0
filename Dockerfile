# The rollcage gateway image. No registry is reachable, so this is not a
# multi-stage build: `make gateway-image` builds the static binaries on the
# host, copies them and this file into a context directory and builds
# FROM the locally built base image (`make images`).
#
#   docker build -t rollcage/gateway:latest bin/gateway-ctx
FROM rollcage/base:latest
COPY rollcage rollcage-agent /usr/local/bin/
ENV ROLLCAGE_ADDR=0.0.0.0:8080 \
    ROLLCAGE_TRAJECTORIES=/var/lib/rollcage/trajectories
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/rollcage", "serve"]
