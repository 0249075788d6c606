"""Create a request and let azure-core's LROPoller (LROBasePolling) follow its
status monitor (the answer's Operation-Location) to its end."""
from azure.core import PipelineClient
from azure.core.pipeline.policies import HeadersPolicy
from azure.core.polling import LROPoller
from azure.core.polling.base_polling import LROBasePolling
from azure.core.rest import HttpRequest


def create_and_wait(base_url, api_key, type_, timeout=60):
    """Return the request when it succeeded; raise when it failed, expired or
    was cancelled (azure.core.exceptions.HttpResponseError)."""
    client = PipelineClient(
        base_url,
        per_call_policies=[HeadersPolicy({"Authorization": "Bearer " + api_key})],
    )
    initial = client.send_request(
        HttpRequest("POST", base_url + "/v1/requests", json={"type": type_}),
        _return_pipeline_response=True,
    )
    initial.http_response.raise_for_status()

    def deserialize(pipeline_response):
        return pipeline_response.http_response.json()

    # timeout is the interval used only when an answer has no Retry-After; ours have.
    poller = LROPoller(client, initial, deserialize, LROBasePolling(timeout=1))
    return poller.result(timeout=timeout)
