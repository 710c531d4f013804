"""Prints template.yaml as AWS SAM expands it (what CloudFormation deploys),
as JSON, offline: aws-sam-translator, with each function's code where `sam package` would
put it. What SAM adds (each function's role and its managed policies, the schedules' roles,
the event source mappings) is then readable by the tests, as a security review reads it.

    python local/checks/sam_expand.py [template.yaml]
"""

import json
import os
import sys

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """Managed policies are named by ARN in the template; none is looked up."""

    def load(self):
        return {}


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "template.yaml"
    with open(path) as template:
        document = yaml_parse(template.read())
    for resource in document["Resources"].values():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = "s3://packaged/likes.zip"
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    expanded = transform(document, {"AWS::Region": "us-east-1"}, NoManagedPolicies())
    json.dump(expanded, sys.stdout, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main()
