"""The pages' views, a module per tab (House, Knowledge, Findings, Sources, Pages, Settings) or
section of one; their addresses are in ``surfaces.urls``."""
