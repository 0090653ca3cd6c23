"""Route dependencies: the app's episode API, from the app state."""

from typing import Annotated

from fastapi import Depends, Request

from services.env_gateway.episode_api import EpisodeAPI


def get_api(request: Request) -> EpisodeAPI:
    api: EpisodeAPI = request.app.state.episode_api
    return api


ApiDep = Annotated[EpisodeAPI, Depends(get_api)]
