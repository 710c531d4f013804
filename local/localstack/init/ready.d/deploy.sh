#!/usr/bin/env bash
# LocalStack "ready" hook: deploy the same template.yaml as AWS, with samlocal.
#
# The bootstrap is built on the host (make build / make build-native), so instead of
# `sam build` (which would need Rust and cargo-lambda in here) every function's CodeUri
# is pointed at target/lambda/likes/ and deployed as is; its Handler picks the function.
#
# Known gap: LocalStack's event source mappings do not emulate tumbling windows,
# BisectBatchOnFunctionError or ParallelizationFactor. The design does not depend on
# them (bisect stays off; one batch per shard is what LocalStack does anyway), so the
# aggregator's exactly-once claims behave here as on AWS.
set -euo pipefail

src=/opt/likes
work=/tmp/likes-deploy
region=${AWS_DEFAULT_REGION:-us-east-1}
export SAM_CLI_TELEMETRY=0 PIP_DISABLE_PIP_VERSION_CHECK=1
export AWS_ENDPOINT_URL=http://127.0.0.1:4566
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test

if [ ! -x "$src/target/lambda/likes/bootstrap" ]; then
  echo "likes: no target/lambda/likes/bootstrap; run 'make build-native' (x86_64 host) or 'make build' (arm64 host) first" >&2
  exit 1
fi

mkdir -p "$work"
if [ ! -x "$work/venv/bin/samlocal" ]; then
  python3 -m venv "$work/venv"
  "$work/venv/bin/pip" install --quiet aws-sam-cli==1.170.0 aws-sam-cli-local==1.71.0 \
    -c "$src/local/constraints.txt"
fi

sed "s#^\( *\)CodeUri: functions\$#\1CodeUri: $src/target/lambda/likes/#" \
  "$src/template.yaml" > "$work/template.yaml"

# The live API's $connect checks tokens against the issuer's keys: by default the local
# development HS256 key (LIKES_LOCAL_JWT_SECRET's default, base64url), as likes-local signs.
local_jwks='{"keys":[{"kty":"oct","alg":"HS256","kid":"local","k":"bG9jYWwtZGV2LXNlY3JldA"}]}'

cd "$work"
"$work/venv/bin/samlocal" deploy \
  --template-file "$work/template.yaml" \
  --stack-name likes \
  --region "$region" \
  --resolve-s3 \
  --capabilities CAPABILITY_IAM \
  --no-confirm-changeset \
  --no-fail-on-empty-changeset \
  --parameter-overrides "JwtIssuer=${LIKES_JWT_ISSUER:-likes-local}" "JwtAudience=${LIKES_JWT_AUDIENCE:-likes}" \
    "JwtJwks=${LIKES_JWT_JWKS:-$local_jwks}"
echo "likes: stack deployed"
