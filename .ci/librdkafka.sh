#!/usr/bin/env bash
# librdkafka's own integration test runner (tests/test-runner of confluentinc/librdkafka at
# a release tag), built under the ignored .cache/ for tests/librdkafka/test_librdkafka_suite.py,
# which runs some of its tests against Trafka. Nothing built here is committed.
#
#   bash .ci/librdkafka.sh            (LIBRDKAFKA_VERSION=v2.14.2 by default;
#                                      LIBRDKAFKA_GIT=<url or path> another clone source)
#
# Needs git, a C/C++ toolchain and make. About 2-3 minutes on 2 cores; does nothing when the
# runner is already built.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
VERSION="${LIBRDKAFKA_VERSION:-v2.14.2}"
DIR=".cache/librdkafka-$VERSION"
if [ -x "$DIR/tests/test-runner" ] && [ -f "$DIR/src/librdkafka.so.1" ]; then
    echo "librdkafka $VERSION test runner: $DIR/tests/test-runner"
    exit 0
fi
rm -rf "$DIR"
mkdir -p .cache
git -c advice.detachedHead=false clone -q --depth 1 --branch "$VERSION" \
    "${LIBRDKAFKA_GIT:-https://github.com/confluentinc/librdkafka.git}" "$DIR"
cd "$DIR"
# --disable-curl/--disable-sasl: no OIDC or SASL libraries needed; the tests run PLAINTEXT
./configure --disable-curl --disable-sasl >/dev/null
make -s -j"$(nproc)" libs
make -s -j"$(nproc)" -C tests build
echo "librdkafka $VERSION test runner: $DIR/tests/test-runner"
