"""JupyterHub's configuration for the class hub: ``jupyterhub -f`` this file (``labkit.tools.hub`` does).

Everything is in ``labkit.tools.hub.configure``, from the settings ``make hub`` wrote; the file ``--config`` names
is loaded after it, so its lines win (another authenticator, admin users, ...).
"""
from labkit.tools import hub

settings = hub.Settings.read()
hub.configure(c, settings)  # noqa: F821 (c: the configuration JupyterHub passes to this file)
if settings.extra_config:
    load_subconfig(settings.extra_config)  # noqa: F821 (JupyterHub's, as c)
