"""The viewer page's static files (HTML, CSS, JS), shipped as package data and served by functions/get_ui."""
