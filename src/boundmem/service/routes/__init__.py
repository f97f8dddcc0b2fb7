"""The API's routes, one router per resource; `service.app.create_app` includes them all."""
