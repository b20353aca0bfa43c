"""`supergwctl`: the operator's command line over the controller's REST API.

Built on `supergw_proto.rest.ControllerClient` and the API's own models, so installing it
(the `supergw-proto` package) pulls in nothing of the controller. `cli` parses and runs,
`target` finds the controller, the token and the TLS trust, `commands` maps each command
to its API call, `render` prints the answers as tables.
"""
