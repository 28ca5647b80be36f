"""For the kit's maintainers: regenerating files, the self-check, mutation testing."""
