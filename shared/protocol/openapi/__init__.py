"""The served OpenAPI document's data: the operation table (``operations``, assembled from one module per area:
``discovery``, ``runs``, ``evals``, ``registrations``), its ``parameters`` and its ``responses`` schemas.
``shared.services.openapi`` generates the document from them, and the route table (``shared.manifest.routes``) is
derived from the operation table, which every API handler therefore loads: it stays plain data (an import contract)."""
