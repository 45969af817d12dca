"""Writers that turn engine events and findings into terminal output."""
