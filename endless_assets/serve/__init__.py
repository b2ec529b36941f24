"""Serving kept tasks to RL trainers as an OpenEnv environment (`endless serve`, docs/serving.md).

tasks.py chooses the tasks (a SQL filter over `filtered_dataset`); episode.py runs one episode
with the solver stage's loop and the remote client as its policy; environment.py is OpenEnv's
`Environment` over them; hub.py is what a server's sessions share (engine pool, images, session
places); record.py writes every episode to the lake (`served_episodes`); app.py is OpenEnv's
server around it all, run by uvicorn.
"""
